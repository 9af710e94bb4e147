# Sourced by .ci/install-*.sh (not run): apt_install SCRIPT WHAT PACKAGE... installs Debian
# packages as root, or through passwordless sudo. When it cannot (no apt-get, neither root nor
# passwordless sudo, apt-get failed) it says why on stderr, naming SCRIPT and WHAT to install by
# hand, and returns 1; the caller then exits 0, since an install script never fails the build.
# DEBIAN_FRONTEND goes through `env` after sudo: sudo's env_reset drops a variable set before it.
apt_install() {
    local script="$1" what="$2"
    shift 2
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$script: apt-get not found; install $what by hand" >&2
        return 1
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "$script: not root and no passwordless sudo; install $what by hand" >&2
            return 1
        fi
    fi
    if ! ($sudo apt-get update -qq \
            && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends "$@") >/dev/null; then
        echo "$script: apt-get could not install $what; install it by hand, or run apt-get yourself" >&2
        return 1
    fi
}

# go_build SCRIPT PACKAGE BINARY: builds the Go program in PACKAGE into BINARY in GOPATH mode
# against Debian's /usr/share/gocode (GO111MODULE=off: nothing is downloaded), only when a .go
# file is newer than BINARY; the build cache lives beside the binary (no $HOME needed, and
# `git clean` takes both away). On a failed build it prints the compiler's output, naming
# SCRIPT, and returns 1.
go_build() {
    local script="$1" package="$2" binary="$3"
    if [ -x "$binary" ] && [ -z "$(find "$package" -maxdepth 1 -name '*.go' -newer "$binary")" ]; then
        return 0
    fi
    mkdir -p "$(dirname "$binary")"
    local log
    if ! log="$(cd "$package" && GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= \
            GOCACHE="$(dirname "$binary")/go-build-cache" go build -o "$binary.tmp" . 2>&1)"; then
        echo "$script: go build failed in $package:" >&2
        echo "$log" >&2
        return 1
    fi
    mv "$binary.tmp" "$binary"
}
