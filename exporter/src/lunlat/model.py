"""The one sample model every source produces and the exposition renders (docs/contract.md §1).

Label sets are objects that render their exposition text once: a source that publishes the same
device on every scrape keeps its LabelSet and pays for escaping only when the labels change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from lunlat.ground import MetricSpec


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class LabelSet:
    """An immutable, ordered set of label names and values with its rendered `{a="b",…}` text."""

    __slots__ = ("names", "text", "values")

    def __init__(self, names: tuple[str, ...], values: tuple[str, ...]) -> None:
        if len(names) != len(values):
            raise ValueError(f"labels {names} given {len(values)} values")
        self.names = names
        self.values = values
        self.text = (
            "{" + ",".join(f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values, strict=True)) + "}"
            if names
            else ""
        )

    def as_dict(self) -> dict[str, str]:
        return dict(zip(self.names, self.values, strict=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelSet) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"LabelSet({self.text})"


class LabelList:
    """A fixed, ordered list of label sets, e.g. the devices a host source publishes.

    It keeps `{labels} ` of each set, rendered once and shared by every metric name: a source that
    publishes the same devices scrape after scrape pays only for printing the values (see
    exposition._render_column). One list for all names, not one per name: with show-paths on
    10,000 devices the per-name lists were 140,000 strings, 17 MiB of the exporter's memory
    (tracemalloc, bench/scrape_vs_node_exporter.py's host).
    """

    __slots__ = ("_texts", "sets")

    def __init__(self, sets: Sequence[LabelSet]) -> None:
        self.sets = tuple(sets)
        self._texts: list[str] | None = None

    def texts(self) -> list[str]:
        """`{labels} ` of each set, in order (the line of a sample is the name, this, the value)."""
        if self._texts is None:
            self._texts = [f"{s.text} " for s in self.sets]
        return self._texts

    def __len__(self) -> int:
        return len(self.sets)


# A sample: the suffix of its name ("" or "_bucket"/"_sum"/"_count" for histograms), labels, value.
Sample = tuple[str, LabelSet, float]


@dataclass(slots=True)
class Family:
    """Samples of one metric. With `exponent` set, every value is an int counted in 10**exponent of
    the base unit (diskstats milliseconds: exponent -3): the exposition prints `1234567e-3`, which
    Prometheus parses to exactly the double nearest 1234.567, at the cost of printing an int."""

    spec: MetricSpec
    samples: list[Sample] = field(default_factory=list)
    exponent: int = 0
    # Values aligned with a LabelList: the columnar form the host layer publishes thousands of.
    column: tuple[LabelList, Sequence[int]] | None = None

    def __post_init__(self) -> None:
        if self.column is not None and len(self.column[0]) != len(self.column[1]):
            raise ValueError(
                f"{self.spec.name}: {len(self.column[1])} values for {len(self.column[0])} label sets"
            )

    def all_samples(self) -> Iterator[Sample]:
        if self.column is not None:
            labels, values = self.column
            for label_set, value in zip(labels.sets, values, strict=True):
                yield ("", label_set, value)
        yield from self.samples

    def value(self, sample: Sample) -> float:
        """The sample's value in the metric's base unit."""
        if self.exponent < 0:  # divide, so 1234567e-3 gives the same double as parsing "1234.567"
            return sample[2] / float(10**-self.exponent)
        return sample[2] * float(10**self.exponent)

    def by_labels(self) -> dict[tuple[str, ...], float]:
        """Values keyed by label values (for tests and tools; not used on the scrape path)."""
        return {sample[1].values: self.value(sample) for sample in self.all_samples() if not sample[0]}

    def add(self, labels: LabelSet, value: float, suffix: str = "") -> None:
        self.samples.append((suffix, labels, value))
