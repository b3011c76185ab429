ID = "dc-012"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Clock Hands

An analog clock shows the time `HH:MM`. The hour hand moves continuously: it
advances `30` degrees per hour and also `0.5` degrees per minute. The minute hand
advances `6` degrees per minute. For each given time, find the smaller of the two
angles between the hands (a value between `0` and `180`).

**Input**

The first line contains `q`. Each of the next `q` lines holds a time `HH:MM` with
`00 <= HH <= 23` and `00 <= MM <= 59` (a 24-hour time; `13:00` looks like `1:00`).

**Output**

For each time, print the smaller angle in degrees with exactly one digit after
the decimal point.

**Constraints**

- `1 <= q <= 1440`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
q = int(data[0])
out = []
for s in data[1:1 + q]:
    h, m = map(int, s.split(":"))
    # angles in half-degrees to stay exact
    hour = (h % 12) * 60 + m
    minute = 12 * m
    d = abs(hour - minute) % 720
    d = min(d, 720 - d)
    out.append(f"{d // 2}.{5 if d % 2 else 0}")
print("\n".join(out))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
q = int(data[0])
out = []
for s in data[1:1 + q]:
    h, m = map(int, s.split(":"))
    hour = (h % 12) * 30
    minute = 6 * m
    d = abs(hour - minute) % 360
    d = min(d, 360 - d)
    out.append(f"{d:.1f}")
print("\n".join(out))
'''


def inputs(rng):
    cases = [
        ["03:00", "12:30", "09:45"],
        ["00:00"],
        ["06:00"],
        ["23:59"],
        ["13:00", "18:00", "12:00"],
        ["02:11", "07:27", "11:59"],
    ]
    all_times = [f"{h:02d}:{m:02d}" for h in range(24) for m in range(60)]
    for q in (10, 50, 120):
        cases.append(rng.sample(all_times, q))
    cases.append(all_times[::4])
    cases.append([f"{h:02d}:00" for h in range(24)])
    return [f"{len(c)}\n" + "\n".join(c) + "\n" for c in cases]
