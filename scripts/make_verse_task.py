#!/usr/bin/env python3
"""Make a multiple-choice task file (eval-tasks' generic JSONL) from a text with one verse per line,
as `bible` prints the KJV ("Ge1:1 In the beginning ..."): which verse comes next?

Each example takes verse i as the context, followed by a newline and the reference of verse i+1
("Ge1:2"); the choices are the true text of verse i+1 and three texts of other verses of the same
range (drawn with the seed), in a random order. The continuation the model scores is " " + choice,
so it reads exactly as the corpus does. Only verses of at most --max-chars characters are choices
(so a choice fits a byte-level model's context; the context verse is left-truncated if needed).
--from/--to pick a range of the lines by fraction (the
default, the last 5%, is what `headwise prepare --val-fraction 0.05` holds out).

Usage: make_verse_task.py --text FILE --out FILE [--n 200] [--seed 0] [--from 0.95] [--to 1.0] [--choices 4] [--max-chars 100]
"""
import argparse
import json
import random
import re

REF = re.compile(r"^(\S*\d+:\d+) (.*)$")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--text", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--from", dest="lo", type=float, default=0.95)
    p.add_argument("--to", dest="hi", type=float, default=1.0)
    p.add_argument("--choices", type=int, default=4)
    p.add_argument("--max-chars", type=int, default=100)
    a = p.parse_args()
    lines = [l.rstrip("\n") for l in open(a.text, encoding="utf-8") if REF.match(l.rstrip("\n"))]
    lines = lines[int(a.lo * len(lines)):int(a.hi * len(lines))]
    verses = [REF.match(l).groups() for l in lines]
    if len(verses) < a.choices + 1:
        raise SystemExit(f"error: {a.text}: only {len(verses)} verses in the range, need at least {a.choices + 1}")
    rng = random.Random(a.seed)
    short = [len(t) <= a.max_chars for _, t in verses]
    starts = [i for i in range(len(verses) - 1) if short[i + 1]]
    rng.shuffle(starts)
    with open(a.out, "w", encoding="utf-8") as f:
        for i in starts[:a.n]:
            ref, text = verses[i]
            true_ref, true_text = verses[i + 1]
            others = [t for j, (_, t) in enumerate(verses) if short[j] and j != i + 1 and t != true_text]
            choices = rng.sample(others, a.choices - 1)
            label = rng.randrange(a.choices)
            choices.insert(label, true_text)
            f.write(json.dumps({"context": f"{ref} {text}\n{true_ref}", "choices": choices, "label": label}) + "\n")


if __name__ == "__main__":
    main()
