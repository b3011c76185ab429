def parse_line(line):
    name, qty = line.rsplit(",", 1)
    return name.strip(), int(qty)
