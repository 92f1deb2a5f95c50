#!/bin/sh
# A kernel that fails: a message on stderr, exit status 3.
echo "loading the kernel" >&2
echo "my_kernel: no device found" >&2
exit 3
