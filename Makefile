# SPDX-License-Identifier: GPL-2.0
#
# Builds sroce.ko against a Rust-enabled kernel tree.
#   make                     against the tree tools/build-kernel.sh cached
#   make KDIR=/path/to/tree  against your own configured, built tree
#   make CLIPPY=1            with clippy lints
#   make check               host tests of the protocol core (cargo)

SROCE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sroce
KDIR ?= $(SROCE_CACHE)/kernel
# Warnings are errors unless asked otherwise (CI keeps the default).
SROCE_WERROR ?= 1

ifeq ($(SROCE_WERROR),1)
sroce_werror := KCFLAGS=-Werror KRUSTFLAGS=-Dwarnings
endif

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(sroce_werror) modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -f rust/rdma/bindings_generated.rs

check:
	cargo test --workspace

rust-analyzer:
	$(MAKE) -C $(KDIR) M=$(CURDIR) rust-analyzer

.PHONY: all modules clean check rust-analyzer
