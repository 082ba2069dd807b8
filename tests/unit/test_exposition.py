"""The hand-written exposition must say exactly what prometheus_client's parser reads back."""

from __future__ import annotations

import math
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from lunlat.exposition import format_value, render
from lunlat.model import Family, LabelList, LabelSet
from tests.support.skip_unless_installed import command

SPEC = contract.DEVICE_READ_TIME


def parsed(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


label_values = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)


@given(st.lists(st.tuples(label_values, label_values), min_size=1, max_size=10, unique_by=lambda t: t))
@settings(max_examples=200, deadline=None)
def test_any_label_value_round_trips(pairs: list[tuple[str, str]]) -> None:
    sets = [LabelSet(("lun", "device"), pair) for pair in pairs]
    family = Family(SPEC, exponent=-3, column=(LabelList(sets), list(range(len(sets)))))
    got = parsed(render([family]))
    samples = next(iter(got.values()))
    assert samples == {
        tuple(sorted({"lun": a, "device": b}.items())): i / 1000 for i, (a, b) in enumerate(pairs)
    }


def test_exponent_prints_exact_milliseconds_as_seconds() -> None:
    labels = LabelList([LabelSet(("lun", "device"), ("x", "sda"))])
    for ms in (0, 1, 999, 1234567, 2**32 - 1, 2**32 + 5, 2**53 + 1):
        text = render([Family(SPEC, exponent=-3, column=(labels, [ms]))])
        assert f" {ms}e-3\n" in text
        (value,) = next(iter(parsed(text).values())).values()
        assert value == float(f"{ms}e-3") == ms / 1000  # the double nearest the decimal


def test_help_type_once_per_family_even_when_sources_share_it() -> None:
    a = Family(contract.LUN_INFO, [("", LabelSet(("lun",), ("a",)), 1)])
    b = Family(contract.LUN_INFO, [("", LabelSet(("lun",), ("b",)), 1)])
    text = render([a, Family(SPEC), b])
    assert text.count(f"# TYPE {contract.LUN_INFO.name} gauge") == 1
    assert SPEC.name not in text  # an empty family is left out
    assert set(parsed(text)[contract.LUN_INFO.name]) == {(("lun", "a"),), (("lun", "b"),)}


def test_non_finite_and_float_values_use_the_text_format_spelling() -> None:
    assert format_value(math.inf) == "+Inf"
    assert format_value(-math.inf) == "-Inf"
    assert format_value(math.nan) == "NaN"
    assert format_value(3) == "3"
    assert format_value(0.1) == "0.1"
    family = Family(contract.SOURCE_DURATION)
    for i, v in enumerate((1.5, math.inf, -math.inf, math.nan, 2)):
        family.add(LabelSet(("source",), (str(i),)), v)
    values = parsed(render([family]))[contract.SOURCE_DURATION.name]
    assert values[(("source", "0"),)] == 1.5
    assert values[(("source", "1"),)] == math.inf
    assert values[(("source", "2"),)] == -math.inf
    assert math.isnan(values[(("source", "3"),)])


def test_same_text_as_prometheus_client_for_the_same_gauge() -> None:
    """Differential check against the library's own exposition for plain samples."""
    registry = CollectorRegistry()
    expected = GaugeMetricFamily("lunlat_source_up", contract.SOURCE_UP.help, labels=["source"])
    expected.add_metric(['we"ird\\name\n'], 1.0)

    class One:
        def collect(self) -> list[GaugeMetricFamily]:
            return [expected]

    registry.register(One())
    ours = Family(contract.SOURCE_UP)
    ours.add(LabelSet(("source",), ('we"ird\\name\n',)), 1.0)
    assert render([ours]) == generate_latest(registry).decode()


def test_any_int_renders_as_a_float_the_text_format_takes() -> None:
    # 10**400 once printed as a 401-digit literal, which Go's ParseFloat refuses (promtool:
    # "expected float"), and with it the whole exposition.
    a, b = LabelSet(("lun", "device"), ("a", "a")), LabelSet(("lun", "device"), ("b", "b"))
    column = Family(SPEC, exponent=-3, column=(LabelList([a, b]), [10**400, 5]))
    samples = Family(contract.DEVICE_READS, [("", a, -(10**400)), ("", b, True)])
    text = render([column, samples])
    assert parsed(text) == {
        SPEC.name: {(("device", "a"), ("lun", "a")): math.inf, (("device", "b"), ("lun", "b")): 0.005},
        contract.DEVICE_READS.name: {
            (("device", "a"), ("lun", "a")): -math.inf,
            (("device", "b"), ("lun", "b")): 1.0,
        },
    }
    check = subprocess.run(
        [command("promtool", "prometheus"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert format_value(10**400, -3) == "+Inf" and format_value(12, -3) == "12e-3"
