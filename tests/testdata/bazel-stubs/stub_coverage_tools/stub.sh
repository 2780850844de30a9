#!/bin/sh
echo "coverage not available offline" >&2
exit 0
