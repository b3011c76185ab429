ID = "dc-024"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Online Time Report

A server writes a log of sessions. Each line is `HH:MM:SS user action`, where
`action` is `login` or `logout`. The lines are in chronological order, all within
one day. For every user, logins and logouts alternate, starting with a login.
A user who is still logged in after the last line is considered to log out at
`23:59:59`.

For each user compute the total number of seconds spent online.

**Input**

The first line contains `n`, the number of log lines, followed by the `n` lines.

**Output**

For each user that appears in the log, in lexicographic order of user names,
print the user name and the total seconds, separated by a space.

**Constraints**

- `1 <= n <= 10^5`
- user names are 1 to 12 lowercase letters or digits
"""

REFERENCE = r'''
import sys
lines = sys.stdin.read().split("\n")
n = int(lines[0])
since = {}
total = {}
for line in lines[1:1 + n]:
    t, user, action = line.split()
    h, m, s = map(int, t.split(":"))
    sec = h * 3600 + m * 60 + s
    total.setdefault(user, 0)
    if action == "login":
        since[user] = sec
    else:
        total[user] += sec - since.pop(user)
for user, start in since.items():
    total[user] += 86399 - start
for user in sorted(total):
    print(user, total[user])
'''

WRONG = r'''
import sys
lines = sys.stdin.read().split("\n")
n = int(lines[0])
since = {}
total = {}
for line in lines[1:1 + n]:
    t, user, action = line.split()
    h, m, s = map(int, t.split(":"))
    sec = h * 3600 + m * 60 + s
    total.setdefault(user, 0)
    if action == "login":
        since[user] = sec
    else:
        total[user] += sec - since.pop(user)
for user in sorted(total):
    print(user, total[user])
'''


def _fmt(sec):
    return f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"


def _rand(rng, n_users, n_events):
    users = sorted({"".join(rng.choice("abcdefxyz019") for _ in range(rng.randint(1, 8))) for _ in range(n_users)})
    times = sorted(rng.sample(range(86400), n_events))
    online = set()
    out = []
    for t in times:
        u = rng.choice(users)
        out.append(f"{_fmt(t)} {u} {'logout' if u in online else 'login'}")
        online ^= {u}
    return out


def inputs(rng):
    cases = [
        ["08:00:00 ann login", "08:30:15 bob login", "09:00:00 ann logout", "10:00:00 bob logout"],
        ["00:00:00 solo login"],
        ["23:59:59 late login"],
        ["12:00:00 x login", "12:00:00 x logout"],
        ["01:00:00 b login", "02:00:00 a login", "03:00:00 b logout", "04:00:00 b login"],
        ["10:00:00 u1 login", "10:00:01 u1 logout", "10:00:02 u1 login", "10:00:05 u1 logout"],
    ]
    for users, n in ((3, 10), (10, 80), (30, 300), (60, 700)):
        cases.append(_rand(rng, users, n))
    cases.append(["00:00:00 zed login", "00:00:00 amy login", "23:59:59 amy logout"])
    return [f"{len(c)}\n" + "\n".join(c) + "\n" for c in cases]
