from __future__ import annotations

import pytest

from searchplay.kg.values import render_coordinate, render_datavalue, render_quantity, render_time


@pytest.mark.parametrize(("time", "precision", "expected"), [
    ("+1879-03-14T00:00:00Z", 11, "14 March 1879"),
    ("+1879-03-14T00:00:00Z", 10, "March 1879"),
    ("+1879-03-14T00:00:00Z", 9, "1879"),
    ("+1879-00-00T00:00:00Z", 11, "1879"),  # day precision claimed but month/day unknown
    ("+1875-00-00T00:00:00Z", 8, "1870s"),
    ("+1879-00-00T00:00:00Z", 7, "19th century"),
    ("+1900-00-00T00:00:00Z", 7, "19th century"),
    ("+2001-00-00T00:00:00Z", 6, "3rd millennium"),
    ("-0044-03-15T00:00:00Z", 11, "15 March 44 BC"),
    ("-0500-00-00T00:00:00Z", 9, "500 BC"),
])
def test_time_rendered_by_precision(time, precision, expected):
    assert render_time(time, precision) == expected


def test_quantity_coordinate_and_unknown_types():
    assert render_quantity("+8849", "metre") == "8849 metre"
    assert render_quantity("-3.5", None) == "-3.5"
    assert render_coordinate(52.5167, -13.3833) == "52.5167°N, 13.3833°W"
    quantity = {"type": "quantity", "value": {"amount": "+1.96", "unit": "http://www.wikidata.org/entity/Q11573"}}
    assert render_datavalue(quantity) == (None, "1.96", "Q11573")
    assert render_datavalue({"type": "quantity", "value": {"amount": "+5", "unit": "1"}}) == (None, "5", None)
    assert render_datavalue({"type": "monolingualtext", "value": {"text": "Douglas Adams", "language": "en"}}) == (
        None, "Douglas Adams", None)
    assert render_datavalue({"type": "wikibase-entityid", "value": {"entity-type": "item", "numeric-id": 5}})[0] == "Q5"
    assert render_datavalue({"type": "wikibase-lexeme-future", "value": {}}) == (None, None, None)
