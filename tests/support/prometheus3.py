"""What Prometheus 3 does differently from 2.x to what it stores and evaluates, as the tests need it.

Each from Prometheus' own text at the module version the tests build (PROMETHEUS3_MODULE_VERSION in
tests/support/prometheus_server.py, github.com/prometheus/prometheus@v0.316.0):

- `le` of a classic histogram's buckets and `quantile` of a summary's are normalised on ingestion
  "to a float like representation" (docs/migration.md, "`le` and `quantile` label values"): the
  parsers pass them through normalizeFloatsInLabelValues (model/textparse/openmetricsparse.go, also
  promparse.go), which spells the parsed float with labels.FormatOpenMetricsFloat
  (model/labels/float.go): 1, 0 and -1 as "1.0", "0.0", "-1.0", NaN and the infinities as "NaN",
  "+Inf", "-Inf", anything else as Go's strconv.FormatFloat(f, 'g', -1, 64) with ".0" appended when
  that has neither a "." nor an "e". Prometheus 2.42 stores the label as the exposition wrote it.
- Go's 'g' with the shortest precision (-1) writes the shortest digits that round-trip and switches
  to the exponent form when the decimal exponent is below -4 or at least 6 (Go's
  src/internal/strconv/ftoa.go, `%e is used if the exponent from the conversion is less than -4 or
  greater than or equal to the precision. if precision was the shortest possible, use precision 6
  for this decision`), the exponent with a sign and at least two digits (fmtE).
"""

from __future__ import annotations

import math
from decimal import Decimal

# Go's 'g' format, shortest precision: the exponent form below 1e-4 and from 1e6 (ftoa.go, above).
_SMALLEST_FIXED_EXPONENT = -4
_FIRST_EXPONENT_FORM = 6


def _go_shortest_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64) for a finite value: Python's repr gives the same
    shortest round-trip digits; only where the exponent form starts differs (repr: from 1e16)."""
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int), value  # finite
    decimal_exponent = len(digits) - 1 + exponent
    prefix = "-" if sign else ""
    if _SMALLEST_FIXED_EXPONENT <= decimal_exponent < _FIRST_EXPONENT_FORM:
        return prefix + format(abs(Decimal(repr(value)).normalize()), "f")
    text = "".join(str(d) for d in digits)
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    return f"{prefix}{mantissa}e{'-' if decimal_exponent < 0 else '+'}{abs(decimal_exponent):02d}"


def stored_float_label(value: str) -> str:
    """A bucket's `le` (or a summary's `quantile`) as Prometheus 3 stores it, given the exposition's
    spelling (labels.FormatOpenMetricsFloat of the parsed float); unparsable values stay as written
    (normalizeFloatsInLabelValues keeps them)."""
    try:
        number = float(value)
    except ValueError:
        return value
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:  # -0 too: Go's f == 0
        return "0.0"
    if number in (1.0, -1.0):
        return f"{number:.1f}"
    text = _go_shortest_g(number)
    return text if "." in text or "e" in text else f"{text}.0"
