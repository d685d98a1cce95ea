# SPDX-License-Identifier: GPL-2.0
#
# Builds sroce.ko against a Rust-enabled kernel tree.
#   make                     against the tree tools/build-kernel.sh cached
#   make KDIR=/path/to/tree  against your own configured, built tree
#   make CLIPPY=1            with clippy lints
#   make check               host tests of the protocol core (cargo)
#   make install             installs the built sroce.ko into the tree's
#                            kernel (/lib/modules/RELEASE/updates), runs depmod
#
# A kernel built with clang needs its modules built with LLVM too: taken
# from the tree's .config unless LLVM is given (LLVM=-19 if only clang-19
# is on PATH, as Debian installs it).

SROCE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sroce
KDIR ?= $(SROCE_CACHE)/kernel
# Warnings are errors unless asked otherwise (CI keeps the default).
SROCE_WERROR ?= 1

ifeq ($(SROCE_WERROR),1)
sroce_werror := KCFLAGS=-Werror KRUSTFLAGS=-Dwarnings
endif

ifeq ($(origin LLVM),undefined)
ifneq ($(shell grep -s '^CONFIG_CC_IS_CLANG=y' $(KDIR)/.config),)
clang_major := $(shell sed -n 's/^CONFIG_CLANG_VERSION=\([0-9]*\)[0-9]\{4\}$$/\1/p' $(KDIR)/.config)
LLVM := $(if $(shell command -v clang),1,-$(clang_major))
endif
endif
sroce_llvm := $(if $(LLVM),LLVM=$(LLVM))

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(sroce_llvm) $(sroce_werror) modules

# The kernel's modules_install for an external module: into
# $(INSTALL_MOD_PATH)/lib/modules/RELEASE/updates, then depmod, so that
# `modprobe sroce` and `rdma link add ... type sroce` load it.
install:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(sroce_llvm) modules_install

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(sroce_llvm) clean
	rm -f rust/rdma/bindings_generated.rs

check:
	cargo test --workspace

rust-analyzer:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(sroce_llvm) rust-analyzer

.PHONY: all modules install clean check rust-analyzer
