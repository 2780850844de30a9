"""Checks the sorted word list the genrule produced."""
with open("app/words.txt") as f:
    got = f.read().split()
assert got == ["alpha", "beta", "gamma"], got
print("words sorted")
