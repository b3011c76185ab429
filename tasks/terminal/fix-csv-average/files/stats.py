#!/usr/bin/env python3
"""Print the mean of every column of a CSV file.

Usage: python3 stats.py FILE.csv

The first row is a header. Every other non-blank row holds numbers (integers
or decimals). Output: one line per column, in header order, `name: mean` with
the mean rounded to two decimals, e.g. `price: 3.50`.
"""

import csv
import sys


def column_means(path):
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    sums = [0] * len(header)
    for i in range(1, len(rows) - 1):
        for j, value in enumerate(rows[i]):
            sums[j] += int(value)
    return {name: sums[j] / len(rows) for j, name in enumerate(header)}


def main():
    means = column_means(sys.argv[1])
    for name, mean in means.items():
        print(f"{name}: {mean:.2f}")


if __name__ == "__main__":
    main()
