#!/bin/sh
# Checks the word count the genrule chain produced.
test "$(cat app/count.txt)" = 3 || { echo "count.txt: $(cat app/count.txt)"; exit 1; }
echo "count ok"
