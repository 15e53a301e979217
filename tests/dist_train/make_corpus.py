#!/usr/bin/env python3
"""Write the deterministic word-salad corpus the distributed tests and the SLURM self-test train on.

  make_corpus.py OUT.txt
"""
import sys
words = ("the of and to in that he shall unto for his i a lord they be is him not them it with "
         "all thou thy was god which my me said but ye their have will thee from as are when").split()
x, out = 12345, []
for i in range(16000):
    x = (1103515245 * x + 12345) % 2**31
    out.append(words[(x >> 8) % len(words)])
    if x % 11 == 0:
        out.append(".\n")
open(sys.argv[1], "w").write(" ".join(out))
