"""Make plugins/datasets/data/adult_tuples_counts.csv, the counts behind the ``adult-tuples`` dataset.

Reads the shared ``adult.csv`` (UCI Adult, all 15 columns of adult.data + adult.test, one person per row,
with a header; see the shared data folder's README) and writes how many persons hold each distinct
combination of age, sex, race, education, workclass and marital_status, so that scenarios and tests run
without the shared data::

    python scripts/make_adult_tuples.py [ADULT_CSV] [--out FILE]

ADULT_CSV defaults to ``$LDPSIM_SHARED_DATA/adult.csv``, else ``shared/data/adult.csv`` beside the checkout.
Values are kept as they are (stripped), "?" included: it is UCI's label of a missing value, and dropping
those persons would change the population. Rows are sorted (age as a number, then the labels), so the
output is byte-for-byte reproducible.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "plugins" / "datasets" / "data" / "adult_tuples_counts.csv"
#: the shipped columns, in this order (age first: the only number)
COLUMNS = ("age", "sex", "race", "education", "workclass", "marital_status")


def default_source() -> Path:
    folder = os.environ.get("LDPSIM_SHARED_DATA")
    return Path(folder) / "adult.csv" if folder else ROOT.parent / "shared" / "data" / "adult.csv"


def count(source: Path) -> tuple[Counter[tuple[str, ...]], int]:
    """Persons per combination of :data:`COLUMNS`, and the number of persons."""
    with source.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            sys.exit(f"{source} has no column(s) {', '.join(missing)}")
        counts = Counter(tuple(row[c].strip() for c in COLUMNS) for row in reader)
    return counts, sum(counts.values())


def write(counts: Counter[tuple[str, ...]], persons: int, source: Path, out: Path) -> None:
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    ages = sorted({int(k[0]) for k in counts})
    header = [
        f"# Joint counts of {', '.join(COLUMNS)} over the {persons:,} persons of UCI Adult (adult.data then"
        " adult.test), one row per distinct combination.",
        "# Source: Becker, B. & Kohavi, R. (1996). Adult [Dataset]. UCI Machine Learning Repository."
        " https://doi.org/10.24432/C5XW20",
        "# License: CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/). Attribution as above;"
        " changed: six columns kept, aggregated.",
        f"# Made by scripts/make_adult_tuples.py from adult.csv (sha256 {digest}), the UCI files with fields"
        " stripped; '?' (UCI's missing value, in workclass) is kept as a label.",
        f"# {len(counts):,} combinations; ages {ages[0]}..{ages[-1]}.",
    ]
    rows = sorted(counts.items(), key=lambda kv: (int(kv[0][0]), kv[0][1:]))
    with out.open("w", newline="", encoding="utf-8") as fh:
        fh.write("\n".join(header) + "\n")
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow([*COLUMNS, "count"])
        writer.writerows([*key, n] for key, n in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=None, help="adult.csv (default: the shared data)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output file (default: {OUT.relative_to(ROOT)})")
    args = parser.parse_args()
    source = args.source or default_source()
    counts, persons = count(source)
    write(counts, persons, source, args.out)
    print(f"{args.out}: {len(counts):,} combinations of {persons:,} persons ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
