/* SPDX-License-Identifier: GPL-2.0 */
/* The C headers bindgen turns into rust/rdma/bindings_generated.rs. */
#include <linux/if_arp.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <uapi/rdma/rdma_user_rxe.h>
#include "sroce_helpers.h"
