from util import parse_line


def main(path):
    with open(path) as fh:
        items = [parse_line(line) for line in fh if line.strip()]
    print(f"{len(items)} items")
