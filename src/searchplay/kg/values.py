"""Render Wikidata datavalues as the human-readable strings that become path nodes and answers.

Dates follow their precision (Wikibase data model: 11 = day, 10 = month, 9 = year, 8 = decade,
7 = century, 6 = millennium): "14 March 1879", "March 1879", "1879", "1870s", "19th century".
Quantities keep their unit (rendered once the unit's label is known), coordinates are degrees.
"""

from __future__ import annotations

from typing import Any

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
ENTITY_PREFIX = "http://www.wikidata.org/entity/"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def render_time(time: str, precision: int) -> str:
    """'+1879-03-14T00:00:00Z' at precision 11 -> '14 March 1879'; 10 -> 'March 1879'; 9 -> '1879'.

    >>> render_time("-0044-03-15T00:00:00Z", 11)
    '15 March 44 BC'
    """
    sign = -1 if time.startswith("-") else 1
    year_text, month_text, rest = time.lstrip("+-").split("-", 2)
    year, month, day = int(year_text), int(month_text), int(rest[:2])
    era = " BC" if sign < 0 else ""
    if precision >= 11 and month and day:
        return f"{day} {MONTHS[month - 1]} {year}{era}"
    if precision >= 10 and month:
        return f"{MONTHS[month - 1]} {year}{era}"
    if precision >= 9:
        return f"{year}{era}"
    if precision == 8:
        return f"{year // 10 * 10}s{era}"
    if precision == 7:
        return f"{_ordinal((year - 1) // 100 + 1)} century{era}"
    if precision == 6:
        return f"{_ordinal((year - 1) // 1000 + 1)} millennium{era}"
    return f"{year} years{era}" if sign > 0 else f"{year} years ago"


def render_amount(amount: str) -> str:
    """'+1234.50' -> '1234.50'; '-3' -> '-3' (the dump's decimal string, sign normalized)."""
    return amount[1:] if amount.startswith("+") else amount


def unit_id(unit: str) -> str | None:
    """'http://www.wikidata.org/entity/Q11573' -> 'Q11573'; '1' (dimensionless) -> None."""
    return unit.removeprefix(ENTITY_PREFIX) if unit.startswith(ENTITY_PREFIX) else None


def render_quantity(amount: str, unit_label: str | None) -> str:
    """'+8848' with unit 'metre' -> '8848 metre'."""
    return f"{render_amount(amount)} {unit_label}" if unit_label else render_amount(amount)


def render_coordinate(latitude: float, longitude: float) -> str:
    """(52.5167, 13.3833) -> '52.5167°N, 13.3833°E'."""
    lat = f"{abs(latitude):.4f}°{'N' if latitude >= 0 else 'S'}"
    lon = f"{abs(longitude):.4f}°{'E' if longitude >= 0 else 'W'}"
    return f"{lat}, {lon}"


def render_datavalue(datavalue: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """A datavalue -> (target entity id, literal text, quantity unit id); unknown types -> all None.

    Items and properties are targets; everything else is a literal. A quantity's literal is only its
    amount until ``render_quantity`` adds the unit label from the store.
    """
    kind, value = datavalue.get("type"), datavalue.get("value")
    if kind == "wikibase-entityid":
        target = value.get("id") or {"item": "Q", "property": "P"}.get(value.get("entity-type"), "?") + str(
            value.get("numeric-id"))
        return target, None, None
    if kind == "string":
        return None, value, None
    if kind == "monolingualtext":
        return None, value["text"], None
    if kind == "time":
        return None, render_time(value["time"], int(value["precision"])), None
    if kind == "quantity":
        return None, render_amount(value["amount"]), unit_id(value.get("unit", "1"))
    if kind == "globecoordinate":
        return None, render_coordinate(float(value["latitude"]), float(value["longitude"])), None
    return None, None, None
