"""kiln.optim.LBFGS (limited-memory BFGS; Liu & Nocedal 1989), as PyTorch's.

    opt = kiln.optim.LBFGS(net.trainable_params(), lr=1, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        return loss

    opt.step(closure)

A step runs up to ``max_iter`` iterations of L-BFGS (at most ``max_eval`` calls of the closure):
the direction is the gradient times an approximation of the inverse Hessian built from the last
``history_size`` pairs of parameter and gradient changes (the two-loop recursion), and the step
length is ``lr`` (the first iteration ever: ``lr * min(1, 1 / sum|g|)``) or, with
``line_search_fn="strong_wolfe"``, the result of a line search for a point satisfying the strong
Wolfe conditions (bracketing, then zooming with cubic interpolation: PyTorch's ``_strong_wolfe``
and ``_cubic_interpolate``, ported). A step stops early when the largest gradient element is at
most ``tolerance_grad``, or the directional derivative, the step or the change of the loss is
below ``tolerance_change``, as PyTorch's does.

LBFGS is eager-only: it calls the closure repeatedly and branches on the values of the loss and
the gradient, which a trace cannot follow, so ``step`` inside a ``kiln.jit`` function is a
KilnValueError; the MindSpore-style ``opt(grads)``, which has no closure to call, is a
KilnTypeError. As in PyTorch, ``step`` needs the closure (without one, a KilnTypeError, which is
a TypeError), and the optimizer has one parameter group (a second is a KilnValueError), whose
parameters must share one dtype (a DTypeError): the algorithm works on all of them as one flat
vector, in that dtype.

The vectors (directions, gradients, the history) are tensors of the parameters' dtype, as in
PyTorch; the scalars (the loss, directional derivatives, step lengths, ``ro`` and ``H_diag``) are
Python floats (float64), where PyTorch keeps some as 0-d tensors of the parameters' dtype, so
float32 results can differ from PyTorch's in the last digits.

State: as PyTorch, the state of the whole step is kept under the first parameter
(``opt.state[0]``): ``func_evals`` and ``n_iter`` (ints, counted over all steps), and after the
first iteration ``d`` (the last direction), ``t`` (the last step length), ``old_dirs`` and
``old_stps`` (lists of the gradient and parameter changes), ``ro`` (their 1 / (y . s)),
``H_diag`` (the scale of the initial inverse Hessian), ``prev_flat_grad`` and ``prev_loss``.
PyTorch's scratch list ``al`` is not kept (a state dict that has it loads; it is remade at each
iteration). ``state_dict()`` copies these; ``load_state_dict`` checks and converts all of them
(tensors of another library or NumPy arrays as ``Optimizer.load_state_dict`` converts state,
numbers as floats or ints) before changing anything.
"""

import math
import numbers

from .. import _C
from .._checks import checked_int
from ..autograd import enable_grad, no_grad
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint import dot
from ..nn._state import converted_like
from .optimizer import Optimizer

__all__ = ["LBFGS"]

# The state of a step, kept under the first parameter: counters, then what the first iteration
# makes (all of it or none).
_COUNTERS = ("func_evals", "n_iter")
_HISTORY = ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss")
_LINE_SEARCHES = (None, "strong_wolfe")


def _dot(a, b):
    return dot(a, b).item()


def _abs_max(v):
    return _C.mint.abs(v).max().item()


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped to
    ``bounds`` (default: [min(x1, x2), max(x1, x2)]); the bounds' midpoint when the cubic has
    no minimizer, or when a division by zero leaves none (where PyTorch's tensors would give an
    infinite or NaN step)."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    try:
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        d2_square = d1 ** 2 - g1 * g2
        if d2_square >= 0:
            d2 = math.sqrt(d2_square)
            if x1 <= x2:
                min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
            else:
                min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
            return min(max(min_pos, low), high)
    except ZeroDivisionError:
        pass
    return (low + high) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A line search along ``d`` from the parameters ``x`` (loss ``f``, flat gradient ``g``,
    directional derivative ``gtd``), starting at step length ``t``, for a step satisfying the
    strong Wolfe conditions (sufficient decrease ``c1``, curvature ``c2``), in at most
    ``max_ls`` evaluations of ``obj_func(x, t, d)`` (-> loss, flat gradient). Returns the loss,
    flat gradient and step length found and the number of evaluations. PyTorch's, ported (from
    Torch7's lswolfe.lua)."""
    d_norm = _abs_max(d)
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = _dot(g_new, d)

    # Bracket an interval containing a point satisfying the Wolfe conditions.
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        insufficient = f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev)
        if not insufficient and abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if insufficient or gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # Interpolate, between 1.01 and 10 times the current step.
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                          bounds=(t + 0.01 * (t - t_prev), t * 10))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:  # (the zoom below does not run then)
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # Zoom: refine the bracket until a point satisfies the conditions.
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break  # the bracket is too small
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # A point too close to an end of the bracket, twice in a row or outside it, moves to
        # 0.1 of the bracket's length from the nearest end.
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insuf_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # No sufficient decrease, or not below the low end: the new high end.
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new, gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True  # the Wolfe conditions hold
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # The old low end becomes the high end.
                for ends in (bracket, bracket_f, bracket_g, bracket_gtd):
                    ends[high_pos] = ends[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new, gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


def _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag):
    """The L-BFGS direction: minus the inverse-Hessian approximation (the history of gradient
    changes ``old_dirs``, parameter changes ``old_stps``, their ``ro``, and the initial scale
    ``h_diag``) times ``flat_grad``. The factors stay 0-d tensors, so no value is read back."""
    al = [None] * len(old_dirs)
    q = -flat_grad
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = dot(old_stps[i], q) * ro[i]
        q = q - al[i] * old_dirs[i]
    r = q * h_diag
    for i in range(len(old_dirs)):
        be_i = dot(old_dirs[i], r) * ro[i]
        r = r + (al[i] - be_i) * old_stps[i]
    return r


def _copied(value):
    """A state value copied for a state dict: tensors cloned, lists copied, numbers as are."""
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value.clone() if isinstance(value, _C.Tensor) else value


def _loaded_float(what, value):
    """A number of a loaded state (a step length, a loss, ...) as a float: a real number, or a
    one-element tensor or array (PyTorch keeps some as 0-d tensors)."""
    if callable(getattr(value, "item", None)):
        try:
            value = value.item()
        except (ValueError, RuntimeError):
            raise KilnValueError(f"{what} has shape {list(getattr(value, 'shape', ()))}, "
                                 f"expected one number") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise KilnTypeError(f"{what} is a {type(value).__name__}, expected a number")
    return float(value)


class LBFGS(Optimizer):
    """LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None, *, maximize=False)

    Eager-only (see kiln.optim.lbfgs): ``step(closure)`` needs the closure, and cannot run
    inside a ``kiln.jit`` function.

    - ``params``: the parameters (one group, of one dtype).
    - ``lr``: the step length (>= 0): the factor on each step, or the line search's first try.
    - ``max_iter``: the most iterations per ``step`` (an int >= 1).
    - ``max_eval``: the most calls of the closure per ``step`` (an int >= 1; default
      ``max_iter * 5 // 4``).
    - ``tolerance_grad``: a step stops when no gradient element is larger in magnitude.
    - ``tolerance_change``: a step stops when the directional derivative, the step or the
      change of the loss is smaller (in magnitude).
    - ``history_size``: how many pairs of changes the inverse-Hessian approximation keeps (an
      int >= 1).
    - ``line_search_fn``: None (steps of length ``lr``) or "strong_wolfe".
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).

    PyTorch checks only ``lr``; the ints are checked here too, as their values below 1 make
    PyTorch's step fail (an empty history to shift, a line search with no evaluation left) or do
    nothing.
    """

    _numeric = {**Optimizer._numeric, "tolerance_grad": None, "tolerance_change": None}
    _integers = ("max_iter", "max_eval", "history_size")

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None, *,
                 maximize=False, **implementation):
        if max_eval is None:
            max_eval = self._checked_int("max_iter", max_iter) * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn,
                                      maximize=maximize), **implementation)
        dtypes = sorted({p.dtype.name for p in self.parameters})
        if len(dtypes) > 1:
            raise DTypeError(f"LBFGS: the parameters must share one dtype (the algorithm works "
                             f"on them as one flat vector), got {', '.join(dtypes)}")

    @classmethod
    def _checked_int(cls, name, value):
        return checked_int(cls.__name__, name, value, low=1)

    def _check_hyperparameters(self, group):
        super()._check_hyperparameters(group)
        for name in self._integers + ("line_search_fn",):
            self._check_setting(name, group[name])

    @classmethod
    def _check_setting(cls, name, value):
        if name in cls._integers:
            cls._checked_int(name, value)
        elif name == "line_search_fn":
            if value not in _LINE_SEARCHES:
                raise KilnValueError(f"{cls.__name__}: line_search_fn must be None or "
                                     f"'strong_wolfe', got {value!r}")
        else:
            super()._check_setting(name, value)

    def add_param_group(self, group):
        """Adds the parameter group: only one, as in PyTorch (a second is a KilnValueError)."""
        if self.param_groups:
            raise KilnValueError("LBFGS doesn't support per-parameter options (parameter "
                                 "groups): it optimizes one group, and has one already")
        super().add_param_group(group)

    def __call__(self, grads):
        raise KilnTypeError("LBFGS cannot step from gradients (opt(grads)): it evaluates the "
                            "loss and gradient several times per step; call opt.step(closure) "
                            "with a closure that recomputes them and returns the loss")

    # ----------------------------------------------------------------------------------------
    # The parameters as one flat vector

    def _gather_flat_grad(self):
        mint = _C.mint
        views = []
        for i, p in enumerate(self.parameters):
            if p.grad is None:
                views.append(mint.zeros(p.numel(), dtype=p.dtype))
                continue
            if tuple(p.grad.shape) != tuple(p.shape):
                raise ShapeError(f"LBFGS: the gradient of parameter {i} has shape "
                                 f"{list(p.grad.shape)}, expected {list(p.shape)}")
            views.append(p.grad.reshape(-1))
        flat = mint.cat(views)
        return -flat if self.param_groups[0]["maximize"] else flat

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self.parameters:
            numel = p.numel()
            p += step_size * update[offset:offset + numel].reshape(p.shape)
            offset += numel

    def _set_param(self, values):
        for p, value in zip(self.parameters, values):
            p[...] = value

    def _evaluate(self, closure):
        """Calls ``closure`` with grad mode on; returns what it returned and the loss as a float
        (negated when maximizing: L-BFGS minimizes)."""
        with enable_grad():
            loss = closure()
        try:
            value = float(loss)
        except (TypeError, ValueError):
            raise KilnTypeError(f"LBFGS: the closure must return the loss (a number or a "
                                f"one-element tensor), got {type(loss).__name__}") from None
        return loss, -value if self.param_groups[0]["maximize"] else value

    def _directional_evaluate(self, closure, x, t, d):
        """The loss and flat gradient at ``x + t * d``; the parameters go back to ``x``."""
        self._add_grad(t, d)
        _, loss = self._evaluate(closure)
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    # ----------------------------------------------------------------------------------------
    # The step

    def step(self, closure=None):
        """Up to ``max_iter`` iterations of L-BFGS; returns the loss the closure returned first.
        ``closure`` (required) zeroes the gradients, recomputes the loss, calls ``backward`` and
        returns the loss; it is called with grad mode on."""
        if closure is None:
            raise KilnTypeError("LBFGS.step() needs a closure: L-BFGS evaluates the loss and "
                                "gradient several times per step (a function that zeroes the "
                                "gradients, computes the loss, calls backward and returns it)")
        if _C.jit.is_tracing():
            raise KilnValueError("LBFGS.step cannot run inside a kiln.jit function: it calls the "
                                 "closure repeatedly and branches on the loss and gradient "
                                 "values, which a trace cannot follow; call it eagerly")
        with no_grad():
            return self._minimize(closure)

    def _minimize(self, closure):
        mint = _C.mint
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state[0]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss, loss = self._evaluate(closure)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        opt_cond = _abs_max(flat_grad) <= tolerance_grad
        if opt_cond:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # The direction: steepest descent at the first iteration ever, then L-BFGS's.
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # (else the pair would break positive definiteness)
                    if len(old_dirs) == group["history_size"]:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag)
            prev_flat_grad, prev_loss = flat_grad, loss

            # The step length.
            if state["n_iter"] == 1:
                total = mint.abs(flat_grad).sum().item()
                t = (1.0 / total if total > 1.0 else 1.0) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:
                break  # the directional derivative is below tolerance

            if group["line_search_fn"] is not None:
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(closure, x, t, d),
                    [p.clone() for p in self.parameters], t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = _abs_max(flat_grad) <= tolerance_grad
            else:
                self._add_grad(t, d)
                ls_func_evals = 0
                if n_iter != max_iter:
                    # Not after the last iteration: in a stochastic setting that evaluation
                    # would be of no use.
                    _, loss = self._evaluate(closure)
                    flat_grad = self._gather_flat_grad()
                    opt_cond = _abs_max(flat_grad) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if (n_iter == max_iter or current_evals >= max_eval or opt_cond
                    or _abs_max(d * t) <= tolerance_change
                    or abs(loss - prev_loss) < tolerance_change):
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    # ----------------------------------------------------------------------------------------
    # Checkpoints

    def state_dict(self):
        """{"state": {0: copies of the state of the step} (empty before the first step),
        "param_groups": [the group's hyperparameters, with "params" as parameter indices]}: the
        structure of PyTorch's LBFGS state dict, for ``load_state_dict``."""
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        group["params"] = list(range(len(self.parameters)))
        state = {0: {k: _copied(v) for k, v in self.state[0].items()}} if self.state[0] else {}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict):
        """Restores the hyperparameters and the state of the step from a ``state_dict()`` (or
        PyTorch's LBFGS's), checking and converting all of it before changing anything."""
        name = "LBFGS.load_state_dict"
        history = None
        if isinstance(state_dict, dict) and isinstance(state_dict.get("state"), dict):
            history = self._loaded_history(name, state_dict["state"])
            state_dict = {**state_dict, "state": {}}
        # (Otherwise malformed: the base class says how.) It resets each parameter's state
        # tensors, and LBFGS has none: its state is set aside, and put back if the load fails.
        kept = dict(self.state[0])
        self.state[0].clear()
        try:
            super().load_state_dict(state_dict)
        except BaseException:
            self.state[0].update(kept)
            raise
        self.state[0].update(history)

    def _loaded_history(self, name, states):
        """The state of the step in ``states`` (a state dict's "state"), checked and converted."""
        extra = [key for key, entry in states.items() if key != 0 and entry]
        if extra:
            raise KilnValueError(f"{name}: LBFGS keeps its state under parameter 0 (as PyTorch's "
                                 f"does), got state under {extra}")
        saved = states.get(0, {})
        if not isinstance(saved, dict):
            raise KilnTypeError(f"{name}: the state of parameter 0 is a {type(saved).__name__}, "
                                f"expected a dict")
        saved = {key: value for key, value in saved.items() if key != "al"}  # scratch
        expected = (f"expected none, {list(_COUNTERS)}, or those and {list(_HISTORY)} (and "
                    f"optionally PyTorch's 'al')")
        keys = set(saved)
        if keys and keys != set(_COUNTERS) and keys != set(_COUNTERS + _HISTORY):
            raise KilnValueError(f"{name}: the state has {sorted(keys, key=str)}, {expected}")
        if not keys:
            return {}
        history = {key: checked_int(name, f"state {key!r}", saved[key], low=0)
                   for key in _COUNTERS}
        if len(keys) == len(_COUNTERS):
            if history["n_iter"] != 0:
                raise KilnValueError(f"{name}: the state has n_iter {history['n_iter']} but no "
                                     f"history, {expected}")
            return history
        like = _C.mint.zeros(sum(p.numel() for p in self.parameters),
                             dtype=self.parameters[0].dtype)

        def vector(what, value):
            return converted_like(value, like, f"{name}: {what}").clone()

        def items(key):
            value = saved[key]
            if not isinstance(value, (list, tuple)):
                raise KilnTypeError(f"{name}: state {key!r} is a {type(value).__name__}, "
                                    f"expected a list")
            return list(value)

        lists = {key: items(key) for key in ("old_dirs", "old_stps", "ro")}
        if len({len(v) for v in lists.values()}) != 1:
            raise KilnValueError(f"{name}: old_dirs, old_stps and ro have "
                                 f"{[len(v) for v in lists.values()]} entries, expected as many "
                                 f"each")
        for key in ("old_dirs", "old_stps"):
            history[key] = [vector(f"state {key!r}[{i}]", v) for i, v in enumerate(lists[key])]
        history["ro"] = [_loaded_float(f"{name}: state 'ro'[{i}]", v)
                         for i, v in enumerate(lists["ro"])]
        for key in ("d", "prev_flat_grad"):
            history[key] = vector(f"state {key!r}", saved[key])
        for key in ("t", "H_diag", "prev_loss"):
            history[key] = _loaded_float(f"{name}: state {key!r}", saved[key])
        return history
