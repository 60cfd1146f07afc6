#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# stage.sh NAME CMD...: run one pipeline stage, print and record its time.
. "$(dirname "$0")/lib.sh"
mkdir -p "$BUILD"
stage "$@"
