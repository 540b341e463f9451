#!/bin/sh
# Install the Debian packages and npm modules the build and tests need.
# Idempotent and quiet when everything is present; needs root otherwise.
set -eu

# libkrb5-dev: the server's libpq/libpq-be.h (the client's connection, for
# names known without a catalog lookup) includes gssapi.h on Debian.
packages="build-essential postgresql-15 postgresql-server-dev-15 libpq-dev libkrb5-dev
libcurl4-openssl-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler zlib1g-dev libunwind-dev
nodejs npm time chromium python3 clang libclang-rt-14-dev valgrind openssl gdb postgresql-plperl-15"

missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# A newer Node.js from another source may already provide node and npm.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
	missing=$(echo "$missing" | tr ' ' '\n' | grep -v -x -e nodejs -e npm | tr '\n' ' ')
fi
missing=$(echo $missing)

if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: missing Debian packages: $missing" >&2
		echo "install-deps: run as root (or: sudo apt-get install $missing)" >&2
		exit 1
	fi
	echo "install-deps: apt-get install $missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

if [ ! -d tests/integration/node_modules ] ||
   [ tests/integration/package-lock.json -nt tests/integration/node_modules ]; then
	echo "install-deps: npm ci (tests/integration)"
	(cd tests/integration && npm ci --no-audit --no-fund --loglevel=error)
	touch tests/integration/node_modules
fi
