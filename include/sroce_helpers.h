/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C wrappers for static inline functions and macros of the RDMA and netdev
 * cores, which Rust cannot call directly. Each is a one-line forwarder; the
 * Rust `rdma` layer is their only user. Prefixed sroce_ so they never clash
 * with the kernel's own rust_helper_* exports.
 */
#ifndef SROCE_HELPERS_H
#define SROCE_HELPERS_H

#include <linux/highmem.h>
#include <linux/netdevice.h>
#include <linux/refcount.h>
#include <linux/scatterlist.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

struct net_device *sroce_netdev_notifier_info_to_dev(void *info);
bool sroce_netif_running(const struct net_device *ndev);
bool sroce_netif_carrier_ok(const struct net_device *ndev);
enum ib_port_state sroce_ib_get_curr_port_state(struct net_device *ndev);
void sroce_ib_mark_name_assigned_by_user(struct ib_device *ibdev);
void sroce_dev_put(struct net_device *ndev);
void *sroce_vmalloc_user(unsigned long size);
void sroce_memcpy_shared(void *dst, const void *src, size_t len);

/* Memory regions: key table, pinned pages, their mapping. */
void sroce_xa_init_alloc(struct xarray *xa);
int sroce_xa_reserve_cyclic(struct xarray *xa, u32 *id, u32 min, u32 max,
			    u32 *next);
int sroce_xa_store(struct xarray *xa, unsigned long index, void *entry);
bool sroce_refcount_inc_not_zero(refcount_t *r);
void sroce_kfree_rcu_mightsleep(void *p);
struct page *sroce_sg_page_iter_page(struct sg_page_iter *piter);
void sroce_memcpy_to_page(struct page *page, size_t offset, const void *from,
			  size_t len);
void sroce_memcpy_from_page(void *to, struct page *page, size_t offset,
			    size_t len);
void *sroce_kmap_local_page(struct page *page);
void sroce_kunmap_local(const void *addr);

#endif
