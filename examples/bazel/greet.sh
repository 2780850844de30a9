#!/bin/sh
# Prints a greeting for its first argument.
echo "hello, $1"
