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
#include <linux/kthread.h>
#include <linux/netdevice.h>
#include <linux/refcount.h>
#include <linux/scatterlist.h>
#include <linux/xarray.h>
#include <linux/skbuff.h>
#include <net/genetlink.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>

struct net_device *sroce_netdev_notifier_info_to_dev(void *info);
bool sroce_netif_running(const struct net_device *ndev);
bool sroce_netif_carrier_ok(const struct net_device *ndev);
enum ib_port_state sroce_ib_get_curr_port_state(struct net_device *ndev);
void sroce_ib_mark_name_assigned_by_user(struct ib_device *ibdev);
void sroce_dev_hold(struct net_device *ndev);
void sroce_dev_put(struct net_device *ndev);
void *sroce_vmalloc_user(unsigned long size);
void sroce_memcpy_shared(void *dst, const void *src, size_t len);
void sroce_spin_lock_bh(spinlock_t *lock);
void sroce_spin_unlock_bh(spinlock_t *lock);
bool sroce_spin_trylock_bh(spinlock_t *lock);
bool sroce_bh_lockable(void);
void sroce_preempt_disable(void);
void sroce_preempt_enable(void);
void sroce_kthread_init_work(struct kthread_work *work, kthread_work_func_t fn);
bool sroce_kthread_worker_elsewhere(struct kthread_worker *worker, unsigned int cpu);
unsigned int sroce_num_online_cpus(void);

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

/* Packet I/O (rust/net/). */
struct net *sroce_dev_net(const struct net_device *ndev);
int sroce_netdev_ifindex(const struct net_device *ndev);
bool sroce_ifindex_link_up(struct net *net, int ifindex);
unsigned int sroce_ll_reserved_space(const struct net_device *ndev);
void *sroce_rcu_dereference_sk_user_data(const struct sock *sk);
struct sk_buff *sroce_alloc_skb(unsigned int size, gfp_t gfp);
unsigned int sroce_skb_tailroom(const struct sk_buff *skb);
void sroce_kfree_skb(struct sk_buff *skb);
void sroce_consume_skb(struct sk_buff *skb);
void sroce_skb_reserve(struct sk_buff *skb, int len);
bool sroce_pskb_may_pull(struct sk_buff *skb, unsigned int len);
unsigned int sroce_skb_headlen(const struct sk_buff *skb);
/*
 * Gives an skb without fragments one of 2^order pages (allocated
 * atomically) that holds no data yet; false if there is no memory.
 * sroce_skb_page_put() and sroce_skb_page_trim() then grow and shrink the
 * data in it, and sroce_skb_page_data() is its first byte.
 */
bool sroce_skb_add_page(struct sk_buff *skb, unsigned int order);
void *sroce_skb_page_put(struct sk_buff *skb, unsigned int len);
void sroce_skb_page_trim(struct sk_buff *skb, unsigned int len);
void *sroce_skb_page_data(const struct sk_buff *skb);
/*
 * The destination QP of a RoCEv2 datagram (BTH bytes 5-7 after the UDP
 * header at the skb's transport offset), or -1 if it is not there.
 */
int sroce_skb_bth_dest_qp(const struct sk_buff *skb);
/*
 * Unlinks skb from the list of segments being walked (the walker keeps its
 * own next pointer) and returns whether the next one was for the same
 * destination QP.
 */
bool sroce_skb_unlink_followed_to_same_qp(struct sk_buff *skb);
unsigned char *sroce_skb_network_header(const struct sk_buff *skb);
void sroce_skb_reset_network_header(struct sk_buff *skb);
void sroce_skb_reset_transport_header(struct sk_buff *skb);
struct net_device *sroce_skb_dev(const struct sk_buff *skb);
void sroce_skb_set_dev(struct sk_buff *skb, struct net_device *ndev);
void sroce_skb_set_protocol(struct sk_buff *skb, __be16 proto);
void sroce_skb_set_udp_segments(struct sk_buff *skb, unsigned int gso_size,
				unsigned int segs);
void sroce_skb_dst_set(struct sk_buff *skb, struct dst_entry *dst);
int sroce_dev_hard_header(struct sk_buff *skb, struct net_device *ndev, u16 type,
			  const u8 *daddr, unsigned int len);
int sroce_dev_queue_xmit(struct sk_buff *skb);
struct sk_buff *sroce_skb_share_check(struct sk_buff *skb);
bool sroce_skb_for_other_host(const struct sk_buff *skb);
struct net_device *sroce_dev_by_addr4(struct net *net, __be32 addr);
struct nlattr *sroce_nla_nest_start(struct sk_buff *skb, int attrtype);
void sroce_nla_nest_end(struct sk_buff *skb, struct nlattr *start);
void sroce_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start);
struct net_device *sroce_dev_by_addr6(struct net *net, const struct in6_addr *addr);
struct dst_entry *sroce_dst_clone(struct dst_entry *dst);
struct net_device *sroce_dst_dev(const struct dst_entry *dst);
struct dst_entry *sroce_dst_check(struct dst_entry *dst, u32 cookie);
u32 sroce_dst_cookie6(struct dst_entry *dst);
struct mm_struct *sroce_charge_pinned(unsigned long npages);
void sroce_uncharge_pinned(struct mm_struct *mm, unsigned long npages);
int sroce_roce_gid(struct ib_device *dev, u32 port, u32 index, u8 gid[16], bool *roce_v1);
bool sroce_has_roce_v1_gid(struct ib_device *dev, u32 port, const u8 gid[16]);

/* Generic netlink (rust/net/genl.rs). */
struct sk_buff *sroce_genlmsg_new_default(void);
struct sk_buff *sroce_genlmsg_new_atomic(void);
bool sroce_genl_has_listeners(const struct genl_family *family, struct net *net, unsigned int group);
int sroce_genlmsg_multicast_netns(const struct genl_family *family, struct net *net,
				  struct sk_buff *skb, unsigned int group);
void *sroce_genlmsg_put_reply(struct sk_buff *skb, struct genl_info *info,
			      u8 cmd);
void *sroce_genlmsg_put_dump(struct sk_buff *skb, struct netlink_callback *cb,
			     u8 cmd);
void sroce_genlmsg_end(struct sk_buff *skb, void *hdr);
void sroce_genlmsg_cancel(struct sk_buff *skb, void *hdr);
int sroce_genlmsg_reply(struct sk_buff *skb, struct genl_info *info);
void sroce_genl_set_err_msg(struct genl_info *info, const struct nlattr *attr,
			    const char *msg);
u8 sroce_genl_cmd(const struct genl_info *info);
u8 sroce_genl_dump_cmd(struct netlink_callback *cb);
unsigned long *sroce_genl_dump_cursor(struct netlink_callback *cb);
struct net *sroce_genl_dump_net(struct netlink_callback *cb);
const void *sroce_nla_data(const struct nlattr *nla);
int sroce_nla_len(const struct nlattr *nla);
unsigned int sroce_skb_len(const struct sk_buff *skb);
const char *sroce_ib_device_name(const struct ib_device *ibdev);


/* On-demand paging (rust/rdma/mr_odp.rs); -EOPNOTSUPP without the core's. */
bool sroce_odp_available(void);
struct ib_umem_odp *sroce_umem_odp_get(struct ib_device *dev, u64 addr,
				       u64 len, int access);
struct ib_umem_odp *sroce_umem_odp_alloc_implicit(struct ib_device *dev,
						  int access);
struct ib_umem_odp *sroce_umem_odp_alloc_child(struct ib_umem_odp *root,
					       u64 addr, u64 len);
void sroce_umem_odp_release(struct ib_umem_odp *odp);
void sroce_umem_odp_release_implicit(struct ib_umem_odp *odp);
void sroce_umem_odp_set_private(struct ib_umem_odp *odp, void *private);
int sroce_umem_odp_fault_and_lock(struct ib_umem_odp *odp, u64 addr, u64 len,
				  bool write, bool fault);
void sroce_umem_odp_lock(struct ib_umem_odp *odp);
void sroce_umem_odp_unlock(struct ib_umem_odp *odp);
struct page *sroce_umem_odp_page(struct ib_umem_odp *odp, u64 index,
				 bool *writable);
u64 sroce_umem_odp_start(struct ib_umem_odp *odp);
void sroce_odp_page_written(struct page *page);
#endif
