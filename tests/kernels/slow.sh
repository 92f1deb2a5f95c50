#!/bin/sh
# A kernel that hangs: a child of the shell sleeps far past any timeout the tests give, so the
# report must kill the whole process group. The child's pid goes to PIDFILE for the test to check.
#   usage: slow.sh PIDFILE
sleep 300 &
echo $! >>"$1"
wait
