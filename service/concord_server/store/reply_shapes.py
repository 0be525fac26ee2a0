"""The shapes Lua scripts promise their replies have, checked before anyone reads them.

A reply that does not fit its script's shape is not a value to decode: it is a sign
that the reply was not this script's (a stream out of step) or that the script and
its caller disagree. scripts.Script checks every reply against the shape declared
beside the script's name and turns a mismatch into a bug report (logged at ERROR
with the script's name), a dropped connection and UNAVAILABLE, never a mis-read.

Shapes read like the scripts' ``Returns`` headers:

    INT, STR, NIL, ANY            one value (STR: a bulk string, bytes for raw scripts)
    Codes(0, 1)                   an integer, one of these
    Maybe(STR)                    that shape or nil (Lua false)
    Either(INT, STR)              any one of these shapes
    Tup(INT, STR)                 a list of exactly these
    Seq(INT, INT, each=(STR, INT))  these, then any number of (STR, INT) groups
    Tagged({0: Tup(), 1: Tup(INT, INT)})  a list whose first item says which shape the rest has
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class Shape:
    def fits(self, value: Any) -> bool:
        raise NotImplementedError

    def all_fit(self, values: Sequence[Any]) -> bool:
        return all(map(self.fits, values))

    def __repr__(self) -> str:
        raise NotImplementedError


class _Scalar(Shape):
    def __init__(self, types: type | tuple[type, ...], name: str) -> None:
        self._types, self._name = types, name

    def fits(self, value: Any) -> bool:
        return isinstance(value, self._types) and not isinstance(value, bool)

    def all_fit(self, values: Sequence[Any]) -> bool:
        # Replies hold exact ints, strings and bytes: one C-speed pass over their types.
        exact = self._types if isinstance(self._types, tuple) else (self._types,)
        return set(map(type, values)) <= set(exact) or super().all_fit(values)

    def __repr__(self) -> str:
        return self._name


class _Any(Shape):
    def fits(self, value: Any) -> bool:
        return True

    def __repr__(self) -> str:
        return "any"


INT: Shape = _Scalar(int, "int")
STR: Shape = _Scalar((str, bytes), "str")
NIL: Shape = _Scalar(type(None), "nil")
ANY: Shape = _Any()


class Codes(Shape):
    def __init__(self, *codes: int) -> None:
        self._codes = frozenset(codes)

    def fits(self, value: Any) -> bool:
        return INT.fits(value) and value in self._codes

    def __repr__(self) -> str:
        return "|".join(map(str, sorted(self._codes)))


class Maybe(Shape):
    def __init__(self, shape: Shape) -> None:
        self._shape = shape

    def fits(self, value: Any) -> bool:
        return value is None or self._shape.fits(value)

    def __repr__(self) -> str:
        return f"{self._shape!r}|nil"


class Seq(Shape):
    """``prefix`` items, then zero or more groups of ``each``."""

    def __init__(self, *prefix: Shape, each: Sequence[Shape] = ()) -> None:
        self._prefix, self._each = tuple(prefix), tuple(each)

    def fits(self, value: Any) -> bool:
        if not isinstance(value, list):
            return False
        n = len(self._prefix)
        if len(value) < n or not all(s.fits(v) for s, v in zip(self._prefix, value)):
            return False
        rest = value[n:]
        if not self._each:
            return not rest
        k = len(self._each)
        # Column by column (every group's first item, then every second...): a
        # 100-check reply is 700 items.
        return len(rest) % k == 0 and all(shape.all_fit(rest[i::k]) for i, shape in enumerate(self._each))

    def __repr__(self) -> str:
        items = [repr(s) for s in self._prefix]
        if self._each:
            items.append(f"({', '.join(map(repr, self._each))})...")
        return "{" + ", ".join(items) + "}"


class Either(Shape):
    def __init__(self, *shapes: Shape) -> None:
        self._shapes = shapes

    def fits(self, value: Any) -> bool:
        return any(s.fits(value) for s in self._shapes)

    def __repr__(self) -> str:
        return " or ".join(map(repr, self._shapes))


def Tup(*items: Shape) -> Seq:  # noqa: N802 - reads like a shape, as the others
    return Seq(*items)


class Tagged(Shape):
    """A list whose first item (an int) picks the shape of the rest."""

    def __init__(self, cases: Mapping[int, Seq]) -> None:
        self._cases = dict(cases)

    def fits(self, value: Any) -> bool:
        if not isinstance(value, list) or not value or not INT.fits(value[0]):
            return False
        case = self._cases.get(value[0])
        return case is not None and case.fits(value[1:])

    def __repr__(self) -> str:
        return " or ".join(f"{{{tag}, {repr(case)[1:]}" if repr(case) != "{}" else f"{{{tag}}}"
                           for tag, case in self._cases.items())
