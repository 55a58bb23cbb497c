#!/bin/sh
# An exec provider that exits 0 with nothing on stdout.
. "$(dirname "$0")/common.sh"
exit 0
