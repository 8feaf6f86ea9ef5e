"""T-SQL expressions and search conditions, evaluated: scalar expressions to :class:`Typed`
values, conditions to True, False or None (UNKNOWN, T-SQL's third truth value), with SQL
Server's NULL rules and type precedence; functions are :mod:`.functions`.

Evaluation is pure over a :class:`~.scope.Scope`, so the interpreter and the query code share
it.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, localcontext

from . import nodes as n
from .comparison import compare, like_pattern
from .functions import AGGREGATES, DATEPART_FUNCTIONS, FUNCTIONS
from .scope import Scope, fail, to_type
from .types import (
    INT,
    NVARCHAR,
    NVARCHAR_MAX,
    UNTYPED_NULL,
    VARCHAR,
    ConversionFailed,
    SqlType,
    Typed,
    convert,
    decimal_shape,
    precedence_of,
)
from .xml_methods import run_method

__all__ = ["evaluate", "is_true", "test"]


NILADIC = {
    "CURRENT_TIMESTAMP": "CURRENT_TIMESTAMP",
    "CURRENT_USER": "USER_NAME",
    "SESSION_USER": "USER_NAME",
    "USER": "USER_NAME",
    "SYSTEM_USER": "SUSER_SNAME",
}
"""The functions T-SQL writes without parentheses, and the function each is (current-user-,
session-user-, user-, system-user-transact-sql.md: CURRENT_USER, SESSION_USER and USER are
USER_NAME(); SYSTEM_USER is SUSER_SNAME())."""


def evaluate(expr: n.Expr, scope: Scope) -> Typed:
    """The value of ``expr``.

    Raises:
        TSqlError: SQL Server's error: a conversion (245, 8114, 8169, 241), a divide by zero
            (8134), an undeclared variable (137), an unknown function (195).
    """
    if isinstance(expr, n.Literal):
        return _literal(expr)
    if isinstance(expr, n.Variable):
        return scope.variable(expr.name, scope.line)
    if isinstance(expr, n.Column):
        if len(expr.parts) == 1 and expr.parts[0].upper() in NILADIC:  # keywords in T-SQL
            return FUNCTIONS[NILADIC[expr.parts[0].upper()]]([], scope)
        return scope.column(expr.parts)
    if isinstance(expr, n.GlobalVariable):
        return scope.global_variable(expr.name)
    if isinstance(expr, n.Binary):
        return _binary(expr, scope)
    if isinstance(expr, n.Negate):
        value = evaluate(expr.expr, scope)
        if value.value is None:
            return value
        if isinstance(value.value, int | Decimal | float):
            return Typed(-value.value, value.type)
        raise fail(
            8117,
            f"Operand data type {value.type.name.lower()} is invalid for minus operator.",
            scope,
        )
    if isinstance(expr, n.Cast):
        return _cast(expr, scope)
    if isinstance(expr, n.Case):
        return _case(expr, scope)
    if isinstance(expr, n.Subquery):
        rows = scope.subquery(expr.select)
        if len(rows) > 1:
            raise fail(
                512,
                "Subquery returned more than 1 value. This is not permitted when the subquery "
                "follows =, !=, <, <= , >, >= or when the subquery is used as an expression.",
                scope,
            )
        return rows[0][0] if rows else UNTYPED_NULL  # no row: a NULL of no type of its own
    if isinstance(expr, n.FunctionCall):
        return _function(expr, scope)
    if isinstance(expr, n.XmlMethod):
        return run_method(expr, evaluate(expr.target, scope), scope)
    raise AssertionError(f"unknown expression {expr!r}")


def _literal(expr: n.Literal) -> Typed:
    """A constant's value and type. A number's precision is its own digits, as SQL Server types
    a constant: ``1.50`` is decimal(3, 2), and ``3`` an int that meets a DECIMAL as
    decimal(1, 0) (its ``length``); NULL is the untyped NULL."""
    value = expr.value
    if value is None and expr.type == INT:
        return UNTYPED_NULL
    if isinstance(value, Decimal) and expr.type.name == "DECIMAL" and expr.type.length == 38:
        scale = expr.type.scale or 0
        digits = len(value.as_tuple().digits)
        return Typed(value, SqlType("DECIMAL", min(38, max(digits, scale, 1)), scale))
    if isinstance(value, int) and expr.type.is_integer and expr.type.length is None:
        return Typed(value, SqlType(expr.type.name, len(str(abs(value)))))
    return Typed(value, expr.type)


def _cast(expr: n.Cast, scope: Scope) -> Typed:
    value = evaluate(expr.expr, scope)
    style = None
    if expr.style is not None:
        style_value = evaluate(expr.style, scope).value
        style = int(style_value) if isinstance(style_value, int | str | Decimal) else None
    try:
        return Typed(convert(value.value, value.type, expr.type, style=style), expr.type)
    except ConversionFailed as exc:
        if expr.try_:
            return Typed(None, expr.type)
        raise fail(exc.number, str(exc), scope) from None


def _case(expr: n.Case, scope: Scope) -> Typed:
    results: list[tuple[bool, n.Expr]] = []
    if expr.operand is not None:
        operand = evaluate(expr.operand, scope)
        for when, then in expr.whens:
            assert not isinstance(
                when,
                n.Compare
                | n.Logical
                | n.Not
                | n.IsNull
                | n.InList
                | n.InQuery
                | n.Like
                | n.Between
                | n.Exists
                | n.ColumnUpdated,
            )
            if compare("=", operand, evaluate(when, scope), scope) is True:
                return evaluate(then, scope)
            results.append((False, then))
    else:
        for when, then in expr.whens:
            if test(when, scope) is True:  # type: ignore[arg-type]
                return evaluate(then, scope)
    if expr.otherwise is not None:
        return evaluate(expr.otherwise, scope)
    return Typed(None, NVARCHAR)


def _numeric(value: Typed) -> bool:
    return value.type.is_numeric


def _binary(expr: n.Binary, scope: Scope) -> Typed:
    left = evaluate(expr.left, scope)
    right = evaluate(expr.right, scope)
    op = expr.op
    if (
        op == "+"
        and (left.type.is_character or right.type.is_character)
        and not (_numeric(left) or _numeric(right))
    ):
        result_type = precedence_of(left.type, right.type)
        if (
            left.type.is_character
            and right.type.is_character
            and left.type.length
            and right.type.length
        ):
            result_type = SqlType(result_type.name, left.type.length + right.type.length)
        if left.value is None or right.value is None:
            return Typed(None, result_type)
        a = to_type(left, SqlType(result_type.name), scope)
        b = to_type(right, SqlType(result_type.name), scope)
        return Typed(f"{a}{b}", result_type)
    if op == "+" and left.type.is_binary and right.type.is_binary:
        if left.value is None or right.value is None:
            return Typed(None, left.type)
        a_bytes, b_bytes = left.value, right.value
        assert isinstance(a_bytes, bytes) and isinstance(b_bytes, bytes)
        return Typed(a_bytes + b_bytes, SqlType("VARBINARY"))
    result_type = precedence_of(left.type, right.type)
    if left.value is None or right.value is None:
        return Typed(None, result_type)
    if result_type.is_date and op in "+-":
        base = left if left.type.is_date else right
        other = right if base is left else left
        days = to_type(other, SqlType("FLOAT"), scope)
        delta = timedelta(days=float(days))  # type: ignore[arg-type]
        return Typed(base.value + delta if op == "+" else base.value - delta, base.type)  # type: ignore[operator]
    if not result_type.is_numeric:
        if result_type.is_character:
            raise fail(
                245,
                f"Conversion failed when converting the {str(left.type if left.type.is_character else right.type).split('(')[0]} value "
                f"'{left.value if left.type.is_character else right.value}' to data type "
                f"{(right.type if left.type.is_character else left.type).name.lower()}.",
                scope,
            )
        raise fail(
            402,
            f"The data types {left.type} and {right.type} are incompatible in the "
            f"{ {'+': 'add', '-': 'subtract', '*': 'multiply', '/': 'divide', '%': 'modulo'}[op] } operator.",
            scope,
        )
    if result_type.name == "DECIMAL":
        shapes = decimal_shape(left.type), decimal_shape(right.type)
        if shapes[0] is not None and shapes[1] is not None:
            return _decimal(op, left, right, shapes[0], shapes[1], scope)
    a = to_type(left, result_type, scope)
    b = to_type(right, result_type, scope)
    assert isinstance(a, int | Decimal | float) and isinstance(b, int | Decimal | float)
    if op in "/%" and b == 0:
        raise fail(8134, "Divide by zero error encountered.", scope)
    if op == "+":
        value: object = a + b  # type: ignore[operator]
    elif op == "-":
        value = a - b  # type: ignore[operator]
    elif op == "*":
        value = a * b  # type: ignore[operator]
    elif op == "/":
        if isinstance(a, int) and isinstance(b, int):
            q = abs(a) // abs(b)
            value = q if (a >= 0) == (b >= 0) else -q  # T-SQL truncates toward zero
        else:
            value = a / b  # type: ignore[operator]
    else:
        if isinstance(a, int) and isinstance(b, int):
            value = abs(a) % abs(b) * (1 if a >= 0 else -1)
        else:
            value = a % b  # type: ignore[operator]
    if result_type.is_integer and isinstance(value, int):
        result_type = SqlType(result_type.name)  # not a constant's digits any more
        bits = {"BIGINT": 63, "INT": 31, "SMALLINT": 15, "TINYINT": 8, "BIT": 31}[result_type.name]
        if not -(1 << bits) <= value < (1 << bits):
            raise fail(
                8115,
                f"Arithmetic overflow error converting expression to data type {result_type.name.lower()}.",
                scope,
            )
    return Typed(value, result_type)


def _decimal_type(op: str, p1: int, s1: int, p2: int, s2: int) -> tuple[int, int]:
    """The precision and scale of ``e1 op e2`` on DECIMALs (precision-scale-and-length-
    transact-sql.md): at most 38 digits, the scale cut to keep the integer digits."""
    if op in "+-":
        scale = max(s1, s2)
        integral = max(p1 - s1, p2 - s2)
        precision = scale + integral + 1
        if precision > 38:
            scale = min(scale, 38 - integral)
    elif op == "%":
        scale = max(s1, s2)
        precision = min(p1 - s1, p2 - s2) + scale
    else:
        if op == "*":
            precision, scale = p1 + p2 + 1, s1 + s2
        else:
            scale = max(6, s1 + p2 + 1)
            precision = p1 - s1 + s2 + scale
        if precision > 38:
            integral = precision - scale
            scale = min(scale, 38 - integral) if integral < 32 else min(scale, 6)
    return min(precision, 38), max(scale, 0)


def _decimal(
    op: str,
    left: Typed,
    right: Typed,
    shape1: tuple[int, int],
    shape2: tuple[int, int],
    scope: Scope,
) -> Typed:
    """``left op right`` in exact decimal arithmetic, typed and scaled as SQL Server does (a
    quotient is cut, the other results rounded, to the result's scale)."""
    precision, scale = _decimal_type(op, *shape1, *shape2)
    a, b = Decimal(left.value), Decimal(right.value)  # type: ignore[arg-type]
    if op in "/%" and b == 0:
        raise fail(8134, "Divide by zero error encountered.", scope)
    with localcontext() as context:
        context.prec = 100
        if op == "+":
            exact = a + b
        elif op == "-":
            exact = a - b
        elif op == "*":
            exact = a * b
        elif op == "/":
            exact = a / b
        else:
            exact = a % b  # the sign of the dividend, as T-SQL's %
        value = exact.quantize(
            Decimal(1).scaleb(-scale), rounding=ROUND_DOWN if op == "/" else ROUND_HALF_UP
        )
    if value != 0 and value.adjusted() >= precision - scale:
        raise fail(
            8115, "Arithmetic overflow error converting expression to data type numeric.", scope
        )
    return Typed(value, SqlType("DECIMAL", precision, scale))


# -- conditions ------------------------------------------------------------------------------


def is_true(value: bool | None) -> bool:
    """A condition's outcome as IF and WHERE take it (UNKNOWN is not true)."""
    return value is True


def test(cond: n.Cond, scope: Scope) -> bool | None:
    """The truth of ``cond``: True, False, or None for UNKNOWN (a NULL compared)."""
    if isinstance(cond, n.Compare):
        return compare(cond.op, evaluate(cond.left, scope), evaluate(cond.right, scope), scope)
    if isinstance(cond, n.Logical):
        a = test(cond.left, scope)
        if cond.op == "AND":
            if a is False:
                return False
            b = test(cond.right, scope)
            if b is False:
                return False
            return True if a is True and b is True else None
        if a is True:
            return True
        b = test(cond.right, scope)
        if b is True:
            return True
        return False if a is False and b is False else None
    if isinstance(cond, n.Not):
        inner = test(cond.cond, scope)
        return None if inner is None else not inner
    if isinstance(cond, n.IsNull):
        is_null = evaluate(cond.expr, scope).value is None
        return is_null != cond.negated
    if isinstance(cond, n.InList):
        value = evaluate(cond.expr, scope)
        return _in(value, [evaluate(item, scope) for item in cond.items], cond.negated, scope)
    if isinstance(cond, n.InQuery):
        value = evaluate(cond.expr, scope)
        return _in(value, [row[0] for row in scope.subquery(cond.select)], cond.negated, scope)
    if isinstance(cond, n.Like):
        value = evaluate(cond.expr, scope)
        pattern = evaluate(cond.pattern, scope)
        if value.value is None or pattern.value is None:
            return None
        text = str(to_type(value, NVARCHAR_MAX, scope))
        if not (value.type.is_unicode or pattern.type.is_unicode):
            # ASCII LIKE ignores the trailing blanks of the value; Unicode LIKE keeps them
            # (like-transact-sql.md, "Pattern matching by using LIKE")
            text = text.rstrip(" ")
        matched = (
            like_pattern(str(to_type(pattern, NVARCHAR_MAX, scope))).fullmatch(text) is not None
        )
        return matched != cond.negated
    if isinstance(cond, n.Between):
        value = evaluate(cond.expr, scope)
        low = compare(">=", value, evaluate(cond.low, scope), scope)
        high = compare("<=", value, evaluate(cond.high, scope), scope)
        inside = None if low is None or high is None else (low and high)
        if inside is None:
            return None
        return inside != cond.negated
    if isinstance(cond, n.Exists):
        return len(scope.subquery(cond.select)) > 0
    if isinstance(cond, n.ColumnUpdated):
        return scope.column_updated(cond.column)
    raise AssertionError(f"unknown condition {cond!r}")


def _in(value: Typed, items: list[Typed], negated: bool, scope: Scope) -> bool | None:
    unknown = False
    for item in items:
        result = compare("=", value, item, scope)
        if result is True:
            return not negated
        if result is None:
            unknown = True
    if unknown:
        return None
    return negated


def _function(call: n.FunctionCall, scope: Scope) -> Typed:
    name = call.name
    if call.target is not None:
        raise fail(
            4121,
            f'Cannot find either column "{name.lower()}" or the user-defined function or '
            f'aggregate "{name.lower()}", or the name is ambiguous.',
            scope,
        )
    if name in AGGREGATES:
        return scope.aggregate(call)
    handler = FUNCTIONS.get(name)
    if handler is None:
        raise fail(195, f"'{name}' is not a recognized built-in function name.", scope, severity=15)
    values = [
        Typed(arg.parts[0], VARCHAR)
        if i == 0
        and name in DATEPART_FUNCTIONS
        and isinstance(arg, n.Column)
        and len(arg.parts) == 1
        else evaluate(arg, scope)
        for i, arg in enumerate(call.args)
    ]
    return handler(values, scope)
