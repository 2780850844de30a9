#!/bin/sh
# Checks the output of the genrule chain.
set -eu
want="words:
3
ALPHA
BETA
GAMMA"
got=$(cat counted.txt)
if [ "$got" != "$want" ]; then
  echo "counted.txt is wrong:"; echo "$got"
  exit 1
fi
echo "chain ok"
