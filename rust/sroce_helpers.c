// SPDX-License-Identifier: GPL-2.0
/* See include/sroce_helpers.h. */
#include <linux/vmalloc.h>
#include "sroce_helpers.h"

struct net_device *sroce_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool sroce_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool sroce_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

enum ib_port_state sroce_ib_get_curr_port_state(struct net_device *ndev)
{
	return ib_get_curr_port_state(ndev);
}

void sroce_ib_mark_name_assigned_by_user(struct ib_device *ibdev)
{
	ib_mark_name_assigned_by_user(ibdev);
}

void sroce_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

void *sroce_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

/*
 * Copies to or from memory a process maps and may change at any time (the
 * rings). A C copy: racing plain accesses are tolerated by the kernel's
 * memory model, and every value read is validated after the copy.
 */
void sroce_memcpy_shared(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}
