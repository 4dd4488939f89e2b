"""torch's symbolic sizes (SymInts over sympy symbols s0, s1, ...) as luminal Exprs over
one-letter dimensions, so one compiled graph serves every value of a dynamic size. Each
dimension carries the value range torch's ShapeEnv knows for its symbol (dynamo's >= 2 for
a dynamic size, torch.export.Dim(min, max)): the simplifier proves with it what HF mask
code's sizes need (min(s, 1) == 1), and every call checks it."""
from __future__ import annotations

import string

import sympy
import torch

from .. import _luminal
from .._luminal import Error, Expr

_LETTERS = string.ascii_lowercase + string.ascii_uppercase


class SymbolTable:
    """Gives each torch symbol a dimension letter, in order of first use."""

    def __init__(self) -> None:
        self.letters: dict[sympy.Symbol, str] = {}
        self.dims: dict[sympy.Symbol, Expr] = {}
        self.shape_env = None  # torch's, from the first SymInt seen: the symbols' value ranges

    def letter(self, symbol: sympy.Symbol) -> str:
        if symbol not in self.letters:
            if len(self.letters) == len(_LETTERS):
                raise Error(f"torch front end: more than {len(_LETTERS)} symbolic sizes in one graph")
            self.letters[symbol] = _LETTERS[len(self.letters)]
        return self.letters[symbol]

    def dim(self, symbol: sympy.Symbol) -> Expr:
        """The dimension of `symbol`, with the range the ShapeEnv gives it."""
        if symbol not in self.dims:
            low, high = self._range(symbol)
            self.dims[symbol] = Expr.dim(self.letter(symbol), low, high)
        return self.dims[symbol]

    def _range(self, symbol: sympy.Symbol) -> tuple[int, int | None]:
        ranges = getattr(self.shape_env, "var_to_range", {}) if self.shape_env is not None else {}
        value_range = ranges.get(symbol)
        if value_range is None:
            return 0, None
        # Infinite ends are sympy's oo or torch's int_oo, neither of them an Integer.
        low = int(value_range.lower) if value_range.lower.is_Integer else 0
        high = int(value_range.upper) if value_range.upper.is_Integer else None
        return max(low, 0), high

    def size(self, value) -> int | Expr:
        """An int, a SymInt or a sympy expression as an int (when static) or an Expr."""
        if isinstance(value, bool):
            raise Error(f"torch front end: a size cannot be a bool ({value})")
        if isinstance(value, int):
            return value
        if isinstance(value, torch.SymInt):
            if self.shape_env is None:
                self.shape_env = value.node.shape_env
            expr = value.node.expr
            return self.size(int(expr)) if expr.is_number else self.expr(expr)
        if isinstance(value, sympy.Expr):
            return int(value) if value.is_number else self.expr(value)
        raise Error(f"torch front end: cannot read {value!r} ({type(value).__name__}) as a size")

    def expr(self, e: sympy.Expr) -> Expr:
        from torch.utils._sympy import functions as F

        if e.is_Integer:
            return Expr(int(e))
        if e.is_Symbol:
            return self.dim(e)
        args = [self.expr(a) if not a.is_Integer else int(a) for a in e.args]
        if isinstance(e, sympy.Add):
            return _fold(args, lambda a, b: a + b)
        if isinstance(e, sympy.Mul):
            return _fold(args, lambda a, b: a * b)
        if isinstance(e, (F.FloorDiv, getattr(F, "CleanDiv", F.FloorDiv), getattr(F, "IntTrueDiv", F.FloorDiv))):
            return _as_expr(args[0]) // args[1]
        if isinstance(e, (F.Mod, getattr(F, "PythonMod", F.Mod), sympy.Mod)):
            return _as_expr(args[0]) % args[1]
        if isinstance(e, F.ModularIndexing):
            return (_as_expr(args[0]) // args[1]) % args[2]
        if isinstance(e, (sympy.Max, getattr(F, "Max", sympy.Max))):
            return _fold(args, _luminal.max_expr)
        if isinstance(e, (sympy.Min, getattr(F, "Min", sympy.Min))):
            return _fold(args, _luminal.min_expr)
        if isinstance(e, sympy.Pow) and e.args[1].is_Integer and int(e.args[1]) >= 0:
            return _fold([args[0]] * int(e.args[1]) or [1], lambda a, b: a * b)
        raise Error(f"torch front end: the symbolic size {e} ({type(e).__name__}) has no luminal form")


def _as_expr(value) -> Expr:
    return value if isinstance(value, Expr) else Expr(value)


def _fold(values, combine):
    out = _as_expr(values[0])
    for v in values[1:]:
        out = combine(out, v)
    return out
