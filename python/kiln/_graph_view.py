"""kiln.graph.Graph and kiln.graph.Value: what a backend written in Python sees of a graph.

    class Interpreter:                          # kiln.graph.register_custom_backend("interp", ...)
        def build(self, graph, config):
            return graph                        # anything; run gets it back
        def run(self, graph, inputs):
            values = {}
            for v in graph.inputs:
                values[v] = inputs[v.index]
            for v in graph.constants:
                values[v] = v.tensor
            for node in graph.nodes:
                values[node] = node.call(*[values[i] for i in node.inputs])
            return [values[v] for v in graph.outputs]

A Graph is a snapshot made for one build: its values are plain Python objects, so a backend may
keep them (they do not change with later passes) and use them as dict keys. Every value has a
``kind``: ``"input"`` (a graph input, ``index`` its position in run's inputs), ``"constant"``
(``tensor`` holds it: a weight the traced function read, which the graph sees updated in place,
a Python number as a 0-d tensor, or None for a missing optional input such as a bias) or
``"node"`` (an op: ``op`` its registered name, ``inputs`` the values it takes, ``attrs`` its
attributes with the schema's defaults filled in). ``dtype`` and ``shape`` say what it is (both
None for a multi-output op's tuple, which ``"TupleGetItem"`` nodes, whose attrs hold the
``index``, take apart, and for a None constant). ``node.call(*tensors)`` runs the node's op
eagerly, as the "reference" backend would: one tensor, or a tuple of them for a multi-output op
(and for TupleGetItem, the element of the tuple it is given).
"""

from .errors import KilnTypeError

__all__ = ["Graph", "Value"]


class Value:
    """One value of a Graph: an input, a constant or a node (see kiln.graph's Graph)."""

    __slots__ = ("kind", "name", "dtype", "shape", "op", "inputs", "attrs", "index", "tensor",
                 "_op")

    def __init__(self, kind, name, dtype, shape, op, inputs, attrs, payload):
        self.kind = kind
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.index = payload if kind == "input" else None
        self.tensor = payload if kind == "constant" else None
        self._op = payload if kind == "node" else None

    def call(self, *inputs):
        """Runs this node's op on ``inputs`` (tensors, one per input value) through eager
        dispatch: a tensor, or a tuple of tensors for a multi-output op."""
        if self.kind != "node":
            raise KilnTypeError(f"{self.name} is a graph {self.kind}, not a node: only nodes run")
        if self.op == "TupleGetItem":
            return inputs[0][self.attrs["index"]]
        results = self._op(list(inputs))
        return results[0] if len(results) == 1 and self.shape is not None else tuple(results)

    def __repr__(self):
        what = (f"{self.dtype.name}{list(self.shape)}" if self.shape is not None
                else "tuple" if self.kind == "node" else "None")
        if self.kind == "node":
            args = ", ".join(v.name for v in self.inputs)
            attrs = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
            return f"<{self.name} = {self.op}({args}{attrs}): {what}>"
        return f"<{self.kind} {self.name}: {what}>"


class Graph:
    """A graph as a backend written in Python builds it: ``name``, ``inputs`` (the input values,
    in run's order), ``constants``, ``nodes`` (in an order where each comes after its inputs),
    ``outputs`` (the values run returns, in order; an output may be an input or a constant), and
    ``str(graph)``, the IR text."""

    def __init__(self, name, inputs, constants, nodes, outputs, text):
        self.name = name
        self.inputs = inputs
        self.constants = constants
        self.nodes = nodes
        self.outputs = outputs
        self._text = text

    @classmethod
    def _from_records(cls, name, records, outputs, text):
        values = _values(records)
        by_kind = {"input": [], "constant": [], "node": []}
        for v in values:
            by_kind[v.kind].append(v)
        by_kind["input"].sort(key=lambda v: v.index)
        return cls(name, by_kind["input"], by_kind["constant"], by_kind["node"],
                   [values[i] for i in outputs], text)

    @staticmethod
    def _node_from_records(records):
        """The last record's value (a node whose inputs are the records before it), for a
        backend's supports()."""
        return _values(records)[-1]

    def __str__(self):
        return self._text

    def __repr__(self):
        return (f"<kiln.graph.Graph {self.name!r}: {len(self.inputs)} inputs, "
                f"{len(self.nodes)} nodes, {len(self.outputs)} outputs>")


def _values(records):
    """Values of records (kind, name, dtype, shape, op, input indices, attrs, payload), each
    record's inputs among the ones before it."""
    values = []
    for kind, name, dtype, shape, op, inputs, attrs, payload in records:
        values.append(Value(kind, name, dtype, shape, op, [values[i] for i in inputs], attrs,
                            payload))
    return values
