"""Greets every word of words.txt, or the names given as arguments."""
import sys


def words():
    with open("app/words.txt") as f:
        return [w.strip() for w in f if w.strip()]


if __name__ == "__main__":
    for name in sys.argv[1:] or words():
        print(f"hello, {name}")
