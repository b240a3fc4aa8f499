"""Tensor.__getitem__ / __setitem__ against NumPy: basic indices give views, advanced and boolean
indices copies (with NumPy's placement of the index dims); assignment broadcasts; every error."""

import numpy as np
import pytest

import kiln
import kiln._indexing  # noqa: F401  (installs Tensor.__getitem__ / __setitem__)
from conftest import assert_close, raises, random_array

SHAPE = (4, 5, 6)
DTYPES = [kiln.float32, kiln.float16, kiln.int64, kiln.bool_]
DTYPE_IDS = [d.name for d in DTYPES]
KINDS = ["numpy", "kiln", "list"]


class A:  # an integer index array in a key template
    def __init__(self, values):
        self.values = np.array(values, dtype=np.int64)

    def __repr__(self):
        return f"A({self.values.tolist()})"


class M:  # a boolean mask in a key template, from a fixed pattern
    def __init__(self, shape, every=2):
        self.values = (np.arange(np.prod(shape)).reshape(shape) % every) == 0

    def __repr__(self):
        return f"M({self.values.shape})"


def build(template, kind):
    """The key with A/M placeholders turned into `kind` objects (NumPy arrays, tensors, lists)."""
    if isinstance(template, tuple):
        return tuple(build(t, kind) for t in template)
    if isinstance(template, (A, M)):
        v = template.values
        if kind == "kiln":
            return kiln.tensor(v)
        if kind == "list":
            return v.tolist()
        return v
    return template


def is_basic(template):
    items = template if isinstance(template, tuple) else (template,)
    return not any(isinstance(t, (A, M, bool)) for t in items)


BASIC = [
    0, -1, 3, (1, 2), (1, 2, 3), (-1, -2, -3), slice(None), slice(1, 3), slice(None, None, 2),
    slice(-3, None), slice(1, 100), slice(5, 1), slice(None, None, 3), slice(-100, 2),
    (slice(None), 1), (Ellipsis, 0), (0, Ellipsis), (Ellipsis,), (None,), (None, 0),
    (0, None, slice(1, 3)), (slice(None), None, None, 2), (Ellipsis, None),
    (1, Ellipsis, None, slice(None, None, 2)), (), (slice(1, 3), slice(None, None, 2), -1),
    (slice(None), slice(None), slice(None)), (Ellipsis, slice(2, 4), 0), (None, Ellipsis, None),
    (np.int64(2), slice(1, None)),
]

ADVANCED = [
    A([0, 2]), A([[0, 1], [2, 3]]), A([-1, 0, -3]), (slice(None), A([1, 3])),
    (Ellipsis, A([0, 5, 2])), (A([0, 1]), A([1, 2])), (A([[0], [1]]), A([1, 2, 3])),
    (slice(None), A([0, 1]), A([2, 3])), (A([0, 1]), slice(None), A([2, 3])),
    (0, slice(None), A([1, 2])), (A([0, 1]), 2), (1, A([0, 3])),
    (slice(1, 3), A([0, 2]), slice(None, None, 2)), (None, A([1, 2])), (A([1, 2]), None),
    (A([0, 1]), None, A([1, 2])), (Ellipsis, A([0, 1]), slice(None)), (A([]),),
    (slice(None), A([[1, 2, 3]]), None, slice(1, 4)), (A([3, 2]), A([4]), A([5, 0])),
    (A([[1]]), slice(None, 2), 1), (Ellipsis, A([2]), 3),
    # An `...` that stands for no dims separates advanced indices too (index dims first); one
    # before the first or after the last does not.
    (slice(None), A([0, 1, 2]), Ellipsis, A([2, 0, 1])), (slice(1, 3), A([0, 4]), Ellipsis, 5),
    (slice(None), 1, Ellipsis, A([[0], [5]])), (slice(None), A([1, 2]), Ellipsis, True, A([3, 4])),
    (None, A([0, 1]), Ellipsis, A([1, 2]), slice(None)),
    (slice(None), A([0, 1]), A([2, 3]), Ellipsis), (Ellipsis, A([0, 1]), A([1, 2]), slice(None)),
]

BOOLEAN = [
    M((4,)), M((4, 5)), M((4, 5, 6), every=3), (slice(None), M((5,))), (M((4,)), 1),
    (Ellipsis, M((6,))), (None, M((4, 5))), (M((4,)), A([1, 2])), (slice(1, 3), M((5, 6))),
    True, False, (0, True), (False, slice(None)), (M((4,), every=5), Ellipsis),
    (slice(None), M((5,)), Ellipsis, A([0, 5, 2])), (slice(None), A([0, 1]), Ellipsis, M((6,), 3)),
    (None, M((4,)), Ellipsis, A([1, 3]), slice(None)),
]

ALL_KEYS = BASIC + ADVANCED + BOOLEAN


def case_id(template):
    return repr(template).replace(" ", "")


@pytest.fixture
def base():
    a = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    return a


GET_CASES = [(t, k) for t in ALL_KEYS for k in KINDS if k == "numpy" or not is_basic(t)]


@pytest.mark.parametrize("template, kind", GET_CASES,
                         ids=[f"{k}-{case_id(t)}" for t, k in GET_CASES])
def test_getitem_matches_numpy(template, kind, base):
    x = kiln.tensor(base)
    out = x[build(template, kind)]
    expected = base[build(template, "numpy")]
    assert_close(out, expected)
    if is_basic(template):
        assert out.shares_storage_with(x), "basic indexing must return a view"
    else:
        assert not out.shares_storage_with(x), "advanced indexing must copy"


@pytest.mark.parametrize("key", [slice(None), Ellipsis, (Ellipsis, slice(None)), ()],
                         ids=["colon", "ellipsis", "ellipsis colon", "empty tuple"])
@pytest.mark.parametrize("transposed", [False, True])
def test_an_index_that_selects_everything_is_a_new_view(key, transposed, base):
    # As PyTorch's x[:]: a tensor of its own over x's memory, not x itself.
    x = kiln.tensor(base)
    if transposed:
        x = x.t() if x.ndim == 2 else x.permute(2, 1, 0)
    out = x[key]
    assert out is not x and out.shares_storage_with(x)
    assert out.shape == x.shape and out.stride() == x.stride()
    out[(0,) * x.ndim] = -1.0
    assert x[(0,) * x.ndim].item() == -1.0
    scalar = kiln.tensor(np.float32(2.0))
    assert scalar[...] is not scalar and scalar[...].item() == 2.0


@pytest.mark.parametrize("template", ALL_KEYS, ids=case_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_getitem_across_dtypes_and_a_non_contiguous_base(template, dtype, rng):
    a = random_array(SHAPE[::-1], dtype, rng)
    x = kiln.tensor(a, dtype=dtype).permute(2, 1, 0)
    expected = a.transpose(2, 1, 0)[build(template, "numpy")]
    out = x[build(template, "kiln")]
    assert out.dtype == dtype
    assert_close(out, expected)


def test_basic_index_views_write_through(base):
    x = kiln.tensor(base)
    row = x[1]
    col = x[:, 2, ::2]
    row.numpy()[0, 0] = -1
    col.numpy()[3, 1] = -2
    assert x.numpy()[1, 0, 0] == -1
    assert x.numpy()[3, 2, 2] == -2


def test_0d_tensor_indexing():
    a = np.array(3.5, np.float32)
    x = kiln.tensor(a)
    for key in [(), None, Ellipsis, True, False, (None, Ellipsis)]:
        assert_close(x[key], a[key])
    assert x[()].shares_storage_with(x)
    with raises(kiln.KilnIndexError, match="too many indices"):
        x[0]


def test_tuples_and_ranges_in_a_key_are_sequence_indices():
    # As in NumPy (they were refused); the key itself as a tuple is still one index per dim.
    a = np.arange(12.0).reshape(3, 4)
    x = kiln.tensor(a)
    for key in [((0, 1),), (slice(None), (0, 2)), range(2), (range(1, 3), 0), (0, 1)]:
        assert_close(x[key], a[key])
    x[(0, 2), ] = 7.0
    a[(0, 2), ] = 7.0
    assert_close(x, a)
    with raises(kiln.KilnIndexError, match="a sequence used as an index must be rectangular"):
        x[[0, [1]]]  # NumPy's bare ValueError
    with raises(kiln.KilnTypeError, match="iteration over a 0-d tensor"):
        list(kiln.tensor(1.0))


def test_slice_steps_past_int64_and_the_size():
    # hi - lo + step - 1 overflowed: x[5:9:2**63 - 2] had shape (-1,), x[::2**63 - 1] (0,), and
    # a step of 2**63 was nanobind's TypeError.
    a = np.arange(10.0)
    x = kiln.tensor(a)
    for key in [slice(5, 9, 2**63 - 2), slice(None, None, 2**63 - 1), slice(1, None, 2**62),
                slice(None, None, 2**63), slice(3, None, 2**200), slice(8, 2, 3)]:
        assert_close(x[key], a[key])


def test_slice_bounds_may_be_one_element_integer_tensors():
    # nanoGPT's get_batch: data[i:i + block] with i drawn by randint.
    a = np.arange(20.0)
    x = kiln.tensor(a)
    for i in kiln.mint.randint(0, 12, (5,)):
        assert_close(x[i:i + 8], a[int(i.item()):int(i.item()) + 8])
    assert_close(x[kiln.tensor([2]):kiln.tensor(9, dtype=kiln.int32):kiln.tensor(3)], a[2:9:3])
    for bad in (kiln.tensor(1.0), kiln.tensor([1, 2]), kiln.tensor(True)):
        with raises(kiln.KilnIndexError, match="slice bounds must be ints or 1-element integer "
                                               "tensors"):
            x[bad:]


def test_a_tensor_slice_bound_is_refused_while_jit_traces():
    # Read as an int at the trace, a bound from outside stayed as it was there: a later change
    # gave the old slice without a word.
    i = kiln.tensor(0)
    x = kiln.tensor(np.arange(6.0).reshape(2, 3))
    for bound in (lambda y: i, lambda y: y.sum().to(kiln.int64).reshape(1)):
        f = kiln.jit(lambda y, bound=bound: y[:, bound(y):] * 1)
        with raises(kiln.KilnTypeError, match="a slice bound given as a tensor sets the slice's "
                                              "shape by its value, which a kiln.jit graph cannot "
                                              "follow"):
            f(x)
    assert_close(kiln.jit(lambda y: y[:, 1:] * 1)(x), x.numpy()[:, 1:])


def test_integer_like_scalars_index_like_ints(base):
    x = kiln.tensor(base)
    assert_close(x[np.int32(2)], base[2])
    assert_close(x[kiln.tensor(1)], base[1])
    assert_close(x[np.array(3)], base[3])
    assert x[kiln.tensor(1)].shares_storage_with(x)
    assert_close(x[kiln.tensor([1, 2], dtype=kiln.int32)], base[[1, 2]])
    assert_close(x[kiln.tensor([1, 2], dtype=kiln.int8)], base[[1, 2]])
    assert_close(x[np.array([1, 3], np.uint8)], base[[1, 3]])


def test_mask_built_with_a_comparison(base):
    x = kiln.tensor(base - 50)
    assert_close(x[x > 0], (base - 50)[(base - 50) > 0])


# ---------------------------------------------------------------------------------------------
# __setitem__

def values_for(shape, kind, rng):
    """A value of `kind` that broadcasts to `shape`."""
    if kind == "int":
        return 7
    if kind == "float":
        return -2.5
    if kind == "bool":
        return True
    full = rng.integers(-9, 9, size=shape).astype(np.float32)
    if kind == "numpy":
        return full
    if kind == "kiln":
        return kiln.tensor(full)
    if kind == "list":
        return full.tolist() if full.size else 7
    if kind == "float64":
        return full.astype(np.float64)
    # "row": the last dim only, broadcast over the rest
    return kiln.tensor(full[(0,) * (len(shape) - 1)].copy()) if shape and full.size else 1.0


VALUE_KINDS = ["int", "float", "bool", "numpy", "kiln", "list", "float64", "row"]


@pytest.mark.parametrize("template", ALL_KEYS, ids=case_id)
@pytest.mark.parametrize("value_kind", VALUE_KINDS)
def test_setitem_matches_numpy(template, value_kind, base, rng):
    expected = base.copy()
    key = build(template, "numpy")
    value = values_for(expected[key].shape, value_kind, rng)
    np_value = value.numpy() if isinstance(value, kiln.Tensor) else value
    expected[key] = np_value
    x = kiln.tensor(base)
    x[build(template, "kiln")] = value
    assert_close(x, expected)


@pytest.mark.parametrize("template", [t for t in ALL_KEYS if not is_basic(t)], ids=case_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_setitem_advanced_on_a_non_contiguous_base(template, dtype, rng):
    a = random_array(SHAPE[::-1], dtype, rng)
    expected = a.copy().transpose(2, 1, 0)
    key = build(template, "numpy")
    value = random_array(expected[key].shape, dtype, rng)
    expected[key] = value
    t = kiln.tensor(a, dtype=dtype)
    x = t.permute(2, 1, 0)
    x[build(template, "list")] = kiln.tensor(value, dtype=dtype)
    assert_close(x, expected)
    assert_close(t, expected.transpose(2, 1, 0))  # written through to the base


def test_setitem_with_an_overlapping_source(base):
    x = kiln.tensor(base)
    x[1:] = x[:-1]
    expected = base.copy()
    expected[1:] = expected[:-1].copy()
    assert_close(x, expected)
    y = kiln.tensor(base)
    y[[0, 1]] = y[[1, 0]]
    assert_close(y, base[[1, 0, 2, 3]])


def test_bool_mask_assignment_from_a_comparison(base):
    x = kiln.tensor(base - 60)
    x[x > 0] = 0
    expected = base - 60
    expected[expected > 0] = 0
    assert_close(x, expected)
    x[np.asarray(x.numpy() < -50)] = kiln.tensor(1.0)
    expected[expected < -50] = 1.0
    assert_close(x, expected)


@pytest.mark.parametrize("key", [[0, 2], (slice(None), [1, 3]), np.arange(4) > 1,
                                 ([0, 1], slice(None), [5, 0])])
def test_advanced_setitem_drops_a_values_extra_leading_ones(key, base, rng):
    # NumPy and PyTorch broadcast leading size-1 dims away, as basic assignment does.
    indexed = base[key].shape
    value = rng.standard_normal((1, 1) + indexed).astype(base.dtype)
    for v in (value, value[:, :, :1]):  # the value, and one that also broadcasts its first dim
        for given in (v, kiln.tensor(v)):
            x = kiln.tensor(base)
            x[key] = given
            want = base.copy()
            want[key] = v
            np.testing.assert_array_equal(x.numpy(), want)


def test_setitem_converts_the_value_dtype():
    x = kiln.tensor(np.zeros(4, np.int32))
    x[1:3] = np.array([1.9, -2.7])
    x[[0]] = 5.5
    np.testing.assert_array_equal(x.numpy(), [5, 1, -2, 0])


# Lists whose values Kiln's default float32 would round: a list value is read in the target's
# dtype, as NumPy does, so the result is exact (through float32, 1 + 2**-11 + 2**-40 becomes a
# float16 tie and rounds to 1.0; NumPy gives 1 + 2**-10).
LIST_VALUES = [
    (np.float64, [0.1, 1 / 3, -1e-300]),
    (np.int64, [2**62 + 1, -(2**62) - 3, 3]),
    (np.int64, [2**40 + 1, 0.5, -7]),  # a mixed list: NumPy reads it as float64, exact here
    (np.float32, [0.1, 1 / 3, 16777217]),
    (np.float16, [1 + 2**-11 + 2**-40, 0.1, 65504]),
]


@pytest.mark.parametrize("key", [slice(1, 4), [3, 1, 2], np.array([False, True, True, True])],
                         ids=["slice", "list", "mask"])
@pytest.mark.parametrize("np_dtype, values", LIST_VALUES,
                         ids=[f"{np.dtype(d).name}-{i}" for i, (d, _) in enumerate(LIST_VALUES)])
def test_setitem_list_value_keeps_the_target_precision(np_dtype, values, key):
    expected = np.zeros(4, np_dtype)
    expected[key] = values
    for value in (values, tuple(values)):
        x = kiln.tensor(np.zeros(4, np_dtype))
        x[key] = value
        np.testing.assert_array_equal(x.numpy(), expected)  # exact: no tolerance hides a rounding


def test_setitem_nested_list_value_keeps_float64_precision():
    expected = np.zeros((3, 2))
    value = [[0.1, 0.2], [0.3, 1 / 3]]
    expected[[2, 0]] = value
    expected[1] = [0.7]  # broadcast
    x = kiln.tensor(np.zeros((3, 2)))
    x[[2, 0]] = value
    x[1] = [0.7]
    np.testing.assert_array_equal(x.numpy(), expected)


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int8, kiln.uint8, kiln.bool_, kiln.float16],
                         ids=lambda d: d.name)
def test_setitem_list_value_converts_like_an_array_of_it(dtype):
    # Values the target cannot hold exactly: a list gives what a NumPy array of it gives (floats
    # truncate into ints, as in NumPy); numbers out of an integer target's range are refused, as
    # one number is, where an array casts (wraps).
    fits = dtype in (kiln.int64, kiln.bool_, kiln.float16)
    values = [1.7, -2.2, 300, 0.0] if fits else [1.7, 2.2, 100, 0.0]
    for key in ([0, 1, 2, 3], slice(None)):
        from_list = kiln.tensor(np.zeros(4), dtype=dtype)
        from_array = kiln.tensor(np.zeros(4), dtype=dtype)
        from_list[key] = values
        from_array[key] = np.array(values)
        np.testing.assert_array_equal(from_list.numpy(), from_array.numpy())
        if not fits:
            with raises(kiln.KilnValueError, match="the value 300 does not fit"):
                from_list[key] = [1, 300, 0, 0]
            np.testing.assert_array_equal(from_list.numpy(), from_array.numpy())
    x = kiln.tensor(np.zeros(2, np.int64))
    x[[0, 1]] = [1.7, -2.2]
    np.testing.assert_array_equal(x.numpy(), [1, -2])


# Keys whose advanced indices an `...` standing for no dims separates (NumPy puts the index dims
# first), and neighbours where it does not; several shapes, so a transposed result has the wrong
# shape or the wrong values.
EMPTY_ELLIPSIS_KEYS = [
    ((3, 3, 3), (slice(None), A([0, 1, 2]), Ellipsis, A([2, 0, 1]))),
    ((3, 4, 5), (slice(None), A([0, 1, 2]), Ellipsis, A([2, 0, 1]))),
    ((3, 4, 5, 6), (slice(None), A([0, 1]), Ellipsis, A([1, 2]), slice(1, 3))),
    ((3, 4, 5), (slice(None), A([0, 1]), Ellipsis, 2)),  # an int counts as an advanced index
    ((3, 4, 5), (slice(None), A([0, 1]), Ellipsis, True, A([2, 3]))),
    ((3, 4, 5), (slice(None), A([0, 1]), True, A([2, 3]))),  # so does a scalar bool: adjacent
    ((3, 4, 5), (slice(None), M((4,)), Ellipsis, A([3, 4]))),
    ((2, 3, 4, 5), (slice(None), A([0, 1]), Ellipsis, M((4, 5), every=10))),
    ((3, 4), (A([0, 1]), Ellipsis, A([0, 1]))),
    ((3, 4), (Ellipsis, A([0, 1]), A([0, 1]))),
    ((3, 4), (A([0, 1]), None, A([0, 1]))),
    ((3, 4), (None, A([0, 1]), Ellipsis, A([2, 3]))),
    ((3, 4), (None, A([0, 1]), A([2, 3]), Ellipsis)),
    ((3, 4), (None, M((3,)), Ellipsis, A([2, 3]))),
    ((3, 4, 5), (None, 1, 2, Ellipsis, M((5,)))),
]


@pytest.mark.parametrize("shape, template", EMPTY_ELLIPSIS_KEYS,
                         ids=[f"{s}-{case_id(t)}" for s, t in EMPTY_ELLIPSIS_KEYS])
@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_ellipsis_separates_advanced_indices(shape, template, kind):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    key = build(template, "numpy")
    assert_close(kiln.tensor(a)[build(template, kind)], a[key])
    expected = a.copy()
    value = -1 - np.arange(a[key].size, dtype=np.float32).reshape(a[key].shape)
    expected[key] = value
    x = kiln.tensor(a)
    x[build(template, kind)] = value
    assert_close(x, expected)


# ---------------------------------------------------------------------------------------------
# Errors

GET_ERRORS = [
    (4, kiln.KilnIndexError, r"index 4 is out of bounds for dimension 0 with size 4"),
    (-5, kiln.KilnIndexError, r"index -5 is out of bounds for dimension 0 with size 4"),
    ((0, 5), kiln.KilnIndexError, r"index 5 is out of bounds for dimension 1 with size 5"),
    ((Ellipsis, 6), kiln.KilnIndexError, r"dimension 2 with size 6"),
    ((None, 0, 0, 9), kiln.KilnIndexError, r"dimension 2 with size 6"),
    ([0, 4], kiln.KilnIndexError, r"index 4 is out of bounds for dimension 0 with size 4"),
    ((slice(None), [1, -6]), kiln.KilnIndexError, r"index -6 is out of bounds for dimension 1"),
    ((0, slice(None), [6]), kiln.KilnIndexError, r"index 6 is out of bounds for dimension 2"),
    ((0, 0, 0, 0), kiln.KilnIndexError, r"too many indices for tensor: tensor is 3-dimensional, "
                                        r"but 4 were indexed"),
    ((Ellipsis, Ellipsis), kiln.KilnIndexError, r"single ellipsis"),
    (1.5, kiln.KilnIndexError, r"only integers, slices.*got float"),
    ("a", kiln.KilnIndexError, r"got str"),
    ((0, {}), kiln.KilnIndexError, r"got dict"),
    (np.array([1.0]), kiln.KilnIndexError, r"integer or boolean type, got float64"),
    (kiln.tensor([1.0]), kiln.KilnIndexError, r"integer or boolean type, got float32"),
    ([0.5, 1], kiln.KilnIndexError, r"integer or boolean type"),
    (slice(None, None, -1), kiln.KilnValueError, r"negative slice steps are not supported"),
    ((0, slice(3, 1, -2)), kiln.KilnValueError, r"negative slice steps"),
    (slice(None, None, 0), kiln.KilnValueError, r"slice step cannot be zero"),
    (np.ones(5, bool), kiln.KilnIndexError, r"boolean index did not match.*mask shape \(5,\)"),
    ((slice(None), np.ones((5, 5), bool)), kiln.KilnIndexError, r"tensor dims 1..2 have shape"),
    (np.ones((4, 5, 6, 1), bool), kiln.KilnIndexError, r"too many indices"),
    (([0, 1], [0, 1, 2]), kiln.KilnIndexError, r"could not be broadcast together with shapes "
                                               r"\(2,\), \(3,\)"),
]

GET_ERROR_IDS = [case_id(k) for k, _, _ in GET_ERRORS]


@pytest.mark.parametrize("key, error, match", GET_ERRORS, ids=GET_ERROR_IDS)
def test_getitem_errors(key, error, match, base):
    x = kiln.tensor(base)
    with raises(error, match=match):
        x[key]


@pytest.mark.parametrize("key, error, match", GET_ERRORS, ids=GET_ERROR_IDS)
def test_setitem_errors_leave_the_tensor_intact(key, error, match, base):
    x = kiln.tensor(base)
    with raises(error, match=match):
        x[key] = 1.0
    np.testing.assert_array_equal(x.numpy(), base)


@pytest.mark.parametrize("key, value, match", [
    (0, np.ones(4), r"cannot broadcast"),
    (slice(None), np.ones((2, 4, 5, 6)), r"fewer dimensions"),
    ([0, 1], np.ones(3), r"broadcast to the indexed shape \[2, 5, 6\]"),
    ((slice(None), [0, 1]), np.ones((3, 6)), r"broadcast to the indexed shape \[4, 2, 6\]"),
    (np.arange(4) > 1, np.ones(3), r"broadcast to the indexed shape \[2, 5, 6\]"),
])
def test_setitem_value_shape_errors(key, value, match, base):
    x = kiln.tensor(base)
    with raises(kiln.ShapeError, match=match):
        x[key] = value
    np.testing.assert_array_equal(x.numpy(), base)


def test_errors_are_also_builtin_exceptions(base):
    x = kiln.tensor(base)
    with raises(IndexError):
        x[10]
    with raises(ValueError):
        x[::-1]
    with raises(ValueError):
        x[0] = np.ones(3)


def test_mint_index_helpers_directly(base):
    helpers = kiln._C.mint
    x = kiln.tensor(base)
    out = helpers._index(x, [np.array([1, -1]), np.array([0, 2])])
    assert_close(out, base[[1, -1], [0, 2]])
    helpers._index_put_(x, [np.array([[0], [2]])], 5.0)
    expected = base.copy()
    expected[[[0], [2]]] = 5.0
    assert_close(x, expected)
    y = kiln.tensor(np.zeros(3, np.float32))
    helpers._copy_into(y, 2)
    assert_close(y, np.full(3, 2, np.float32))


def test_a_numpy_index_is_read_at_the_call():
    # An int64 array was shared with the queued op, so shuffling it in place for the next epoch
    # changed the rows of this one (in the 2stage and 4stage pipelines).
    x = kiln.tensor(np.arange(8, dtype=np.float32) * 10)
    target = kiln.tensor(np.zeros(8, dtype=np.float32))
    rows = np.array([1, 2, 3])
    busy = kiln.mint.exp(kiln.mint.exp(kiln.mint.ones(1 << 18)))  # keeps the workers behind
    taken = x[rows]
    target[rows] = 5.0
    rows[:] = 7
    assert taken.tolist() == [10.0, 20.0, 30.0]
    assert target.tolist() == [0.0, 5.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0]
    assert busy.shape == (1 << 18,)


def test_index_tensors_from_outside_a_jitted_function_are_read_at_each_call():
    # An int8 index tensor was converted at the trace and a 0-d one read as an int: later
    # changes to them were not seen (the graph kept their values at the trace).
    x = kiln.tensor(np.arange(5.0, dtype=np.float32))
    small = kiln.tensor(np.array([0, 1]), dtype=kiln.int8)
    scalar = kiln.tensor(1)
    by_small = kiln.jit(lambda x: x[small] * 1.0)
    by_scalar = kiln.jit(lambda x: x[scalar] * 1.0)
    assert by_small(x).tolist() == [0.0, 1.0] and by_scalar(x).item() == 1.0
    small[0] = 3
    scalar[...] = 4
    assert by_small(x).tolist() == [3.0, 1.0] and by_scalar(x).item() == 4.0
    assert kiln.jit(lambda x, i: x[i] * 1.0)(x, kiln.tensor(2)).item() == 2.0  # an argument


def test_boolean_masks_inside_a_jitted_function():
    x = kiln.tensor(np.arange(5.0, dtype=np.float32))
    mask = kiln.tensor(np.array([True, False, False, False, True]))
    with raises(kiln.KilnTypeError, match="indexing with a boolean tensor inside a function "
                                          "kiln.jit traces"):
        kiln.jit(lambda x: x[mask] * 1.0)(x)

    def clip(y, m):
        y = y * 1.0
        y[y > 2] = 0.0  # a mask of y's shape and a number: masked_fill_
        y[m] = -1.0
        return y

    jitted = kiln.jit(clip)
    assert jitted(x, mask).tolist() == clip(x, mask).tolist() == [-1.0, 1.0, 2.0, 0.0, -1.0]
    mask[...] = kiln.tensor(np.array([False, True, False, False, False]))
    assert jitted(x, mask).tolist() == clip(x, mask).tolist() == [0.0, -1.0, 2.0, 0.0, 0.0]
