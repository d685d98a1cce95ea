// SPDX-License-Identifier: GPL-2.0
/* See include/sroce_helpers.h. */
#include <linux/vmalloc.h>
#include <linux/sched/signal.h>
#include <linux/sched/mm.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/dst.h>
#include <net/ip6_fib.h>
#include <net/ip6_checksum.h>
#include <net/udp.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_umem_odp.h>
#include <linux/hmm.h>
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

void sroce_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void sroce_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

/*
 * Copies the RoCE GID at @index of @port's table into @gid and sets
 * @roce_v1 to whether it is of type RoCE v1 (else RoCE v2): 0, or -ENOENT
 * if the slot is empty or of another type.
 */
int sroce_roce_gid(struct ib_device *dev, u32 port, u32 index, u8 gid[16], bool *roce_v1)
{
	const struct ib_gid_attr *attr = rdma_get_gid_attr(dev, port, index);
	int ret = -ENOENT;

	if (IS_ERR(attr))
		return -ENOENT;
	if (attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP || attr->gid_type == IB_GID_TYPE_ROCE) {
		memcpy(gid, attr->gid.raw, 16);
		*roce_v1 = attr->gid_type == IB_GID_TYPE_ROCE;
		ret = 0;
	}
	rdma_put_gid_attr(attr);
	return ret;
}

/* Whether @gid is a RoCE v1 GID of @port's table. Any context. */
bool sroce_has_roce_v1_gid(struct ib_device *dev, u32 port, const u8 gid[16])
{
	const struct ib_gid_attr *attr;
	union ib_gid want;

	memcpy(want.raw, gid, sizeof(want.raw));
	attr = rdma_find_gid_by_port(dev, &want, IB_GID_TYPE_ROCE, port, NULL);
	if (IS_ERR(attr))
		return false;
	rdma_put_gid_attr(attr);
	return true;
}

/*
 * Charges @npages of kernel memory a process maps (its queues) to the
 * process's pinned memory, against RLIMIT_MEMLOCK unless it has
 * CAP_IPC_LOCK: what a NIC's queues in pinned user memory would cost it
 * (ib_umem_get charges the same counter). Returns the charged mm, held
 * for sroce_uncharge_pinned(), or an ERR_PTR: -ENOMEM over the limit,
 * -EINVAL for a caller without an mm.
 */
struct mm_struct *sroce_charge_pinned(unsigned long npages)
{
	struct mm_struct *mm = current->mm;
	unsigned long limit;

	if (!mm)
		return ERR_PTR(-EINVAL);
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	if (atomic64_add_return(npages, &mm->pinned_vm) > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return ERR_PTR(-ENOMEM);
	}
	mmgrab(mm);
	return mm;
}

void sroce_uncharge_pinned(struct mm_struct *mm, unsigned long npages)
{
	atomic64_sub(npages, &mm->pinned_vm);
	mmdrop(mm);
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

void sroce_xa_init_alloc(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC);
}

/* Reserves an index (a NULL entry, which xa_load reports as absent). */
int sroce_xa_reserve_cyclic(struct xarray *xa, u32 *id, u32 min, u32 max,
			    u32 *next)
{
	return xa_alloc_cyclic(xa, id, NULL, XA_LIMIT(min, max), next,
			       GFP_KERNEL);
}

/* Returns 0 or the negative errno xa_store() encoded in its result. */
int sroce_xa_store(struct xarray *xa, unsigned long index, void *entry)
{
	return xa_err(xa_store(xa, index, entry, GFP_KERNEL));
}

bool sroce_refcount_inc_not_zero(refcount_t *r)
{
	return refcount_inc_not_zero(r);
}

void sroce_kfree_rcu_mightsleep(void *p)
{
	kfree_rcu_mightsleep(p);
}

struct page *sroce_sg_page_iter_page(struct sg_page_iter *piter)
{
	return sg_page_iter_page(piter);
}

void sroce_memcpy_to_page(struct page *page, size_t offset, const void *from,
			  size_t len)
{
	memcpy_to_page(page, offset, from, len);
}

void sroce_memcpy_from_page(void *to, struct page *page, size_t offset,
			    size_t len)
{
	memcpy_from_page(to, page, offset, len);
}

void *sroce_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void sroce_kunmap_local(const void *addr)
{
	kunmap_local(addr);
}

struct net *sroce_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

int sroce_netdev_ifindex(const struct net_device *ndev)
{
	return READ_ONCE(ndev->ifindex);
}

bool sroce_ifindex_link_up(struct net *net, int ifindex)
{
	struct net_device *ndev;
	bool up;

	rcu_read_lock();
	ndev = dev_get_by_index_rcu(net, ifindex);
	up = ndev && netif_running(ndev) && netif_carrier_ok(ndev);
	rcu_read_unlock();
	return up;
}

unsigned int sroce_ll_reserved_space(const struct net_device *ndev)
{
	return LL_RESERVED_SPACE(ndev);
}

void *sroce_rcu_dereference_sk_user_data(const struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

struct sk_buff *sroce_alloc_skb(unsigned int size, gfp_t gfp)
{
	return alloc_skb(size, gfp);
}

bool sroce_skb_add_page(struct sk_buff *skb, unsigned int order)
{
	struct page *page;

	page = alloc_pages(GFP_ATOMIC | __GFP_COMP | __GFP_NOWARN, order);
	if (!page)
		return false;
	skb_fill_page_desc(skb, 0, page, 0, 0);
	skb->truesize += PAGE_SIZE << order;
	return true;
}

void *sroce_skb_page_put(struct sk_buff *skb, unsigned int len)
{
	skb_frag_t *frag = &skb_shinfo(skb)->frags[0];
	void *end = skb_frag_address(frag) + skb_frag_size(frag);

	skb_frag_size_add(frag, len);
	skb->len += len;
	skb->data_len += len;
	return end;
}

/* Keeps the (perhaps empty) fragment: more may be put in it. */
void sroce_skb_page_trim(struct sk_buff *skb, unsigned int len)
{
	skb_frag_t *frag = &skb_shinfo(skb)->frags[0];
	unsigned int cut = skb_frag_size(frag) - min(len, skb_frag_size(frag));

	skb_frag_size_sub(frag, cut);
	skb->len -= cut;
	skb->data_len -= cut;
}

void *sroce_skb_page_data(const struct sk_buff *skb)
{
	return skb_frag_address(&skb_shinfo(skb)->frags[0]);
}

unsigned int sroce_skb_tailroom(const struct sk_buff *skb)
{
	return skb_tailroom(skb);
}

void sroce_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void sroce_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

void sroce_skb_reserve(struct sk_buff *skb, int len)
{
	skb_reserve(skb, len);
}

bool sroce_pskb_may_pull(struct sk_buff *skb, unsigned int len)
{
	return pskb_may_pull(skb, len);
}

unsigned int sroce_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

int sroce_skb_bth_dest_qp(const struct sk_buff *skb)
{
	u8 buf[3];
	const u8 *qpn;

	/* An skb not yet pulled to its UDP header has a positive offset. */
	qpn = skb_header_pointer(skb, skb_transport_offset(skb) + 8 + 5,
				 sizeof(buf), buf);
	if (!qpn)
		return -1;
	return (qpn[0] << 16) | (qpn[1] << 8) | qpn[2];
}

bool sroce_skb_unlink_followed_to_same_qp(struct sk_buff *skb)
{
	bool same;
	int qpn;

	if (!skb->next)
		return false;
	qpn = sroce_skb_bth_dest_qp(skb);
	same = qpn >= 0 && sroce_skb_bth_dest_qp(skb->next) == qpn;
	skb_mark_not_on_list(skb);
	return same;
}

unsigned char *sroce_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

void sroce_skb_reset_network_header(struct sk_buff *skb)
{
	skb_reset_network_header(skb);
}

void sroce_skb_reset_transport_header(struct sk_buff *skb)
{
	skb_reset_transport_header(skb);
}

struct net_device *sroce_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

void sroce_skb_set_dev(struct sk_buff *skb, struct net_device *ndev)
{
	skb->dev = ndev;
}

/*
 * Marks a datagram whose IP and UDP headers are written (network and
 * transport headers set, data at the IP header, UDP checksum 0) for UDP
 * segmentation into @segs datagrams of @gso_size payload bytes (the last
 * may be shorter). Segmentation gives every segment its own UDP checksum,
 * so the checksum becomes CHECKSUM_PARTIAL with the pseudo-header sum in
 * place, as UDP GSO senders set it.
 */
void sroce_skb_set_udp_segments(struct sk_buff *skb, unsigned int gso_size,
				unsigned int segs)
{
	struct udphdr *uh = udp_hdr(skb);
	int len = skb->len - skb_transport_offset(skb);

	skb_shinfo(skb)->gso_size = gso_size;
	skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4;
	skb_shinfo(skb)->gso_segs = segs;
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_transport_header(skb) - skb->head;
	skb->csum_offset = offsetof(struct udphdr, check);
	if (skb->protocol == htons(ETH_P_IPV6))
		uh->check = ~udp_v6_check(len, &ipv6_hdr(skb)->saddr,
					  &ipv6_hdr(skb)->daddr, 0);
	else
		uh->check = ~udp_v4_check(len, ip_hdr(skb)->saddr,
					  ip_hdr(skb)->daddr, 0);
}

void sroce_skb_set_protocol(struct sk_buff *skb, __be16 proto)
{
	skb->protocol = proto;
}

void sroce_skb_dst_set(struct sk_buff *skb, struct dst_entry *dst)
{
	skb_dst_set(skb, dst);
}

int sroce_dev_hard_header(struct sk_buff *skb, struct net_device *ndev, u16 type,
			  const u8 *daddr, unsigned int len)
{
	return dev_hard_header(skb, ndev, type, daddr, NULL, len);
}

int sroce_dev_queue_xmit(struct sk_buff *skb)
{
	return dev_queue_xmit(skb);
}

struct sk_buff *sroce_skb_share_check(struct sk_buff *skb)
{
	return skb_share_check(skb, GFP_ATOMIC);
}

bool sroce_skb_for_other_host(const struct sk_buff *skb)
{
	return skb->pkt_type == PACKET_OTHERHOST;
}

struct dst_entry *sroce_dst_clone(struct dst_entry *dst)
{
	return dst_clone(dst);
}

struct net_device *sroce_dst_dev(const struct dst_entry *dst)
{
	return dst_dev(dst);
}

struct dst_entry *sroce_dst_check(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie);
}

u32 sroce_dst_cookie6(struct dst_entry *dst)
{
#if IS_ENABLED(CONFIG_IPV6)
	return rt6_get_cookie(dst_rt6_info(dst));
#else
	return 0;
#endif
}

struct sk_buff *sroce_genlmsg_new_default(void)
{
	return genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
}

struct sk_buff *sroce_genlmsg_new_atomic(void)
{
	return genlmsg_new(NLMSG_GOODSIZE, GFP_ATOMIC);
}

bool sroce_genl_has_listeners(const struct genl_family *family, struct net *net, unsigned int group)
{
	return genl_has_listeners(family, net, group);
}

int sroce_genlmsg_multicast_netns(const struct genl_family *family, struct net *net,
				  struct sk_buff *skb, unsigned int group)
{
	return genlmsg_multicast_netns(family, net, skb, 0, group, GFP_ATOMIC);
}

void *sroce_genlmsg_put_reply(struct sk_buff *skb, struct genl_info *info,
			      u8 cmd)
{
	return genlmsg_put_reply(skb, info, info->family, 0, cmd);
}

void *sroce_genlmsg_put_dump(struct sk_buff *skb, struct netlink_callback *cb,
			     u8 cmd)
{
	const struct genl_info *info = genl_info_dump(cb);

	return genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			   info->family, NLM_F_MULTI, cmd);
}

void sroce_genlmsg_end(struct sk_buff *skb, void *hdr)
{
	genlmsg_end(skb, hdr);
}

void sroce_genlmsg_cancel(struct sk_buff *skb, void *hdr)
{
	genlmsg_cancel(skb, hdr);
}

int sroce_genlmsg_reply(struct sk_buff *skb, struct genl_info *info)
{
	return genlmsg_reply(skb, info);
}

/*
 * NL_SET_ERR_MSG{,_ATTR}() for a message that is not a literal: msg must
 * live as long as the module (extack keeps the pointer until the reply).
 */
void sroce_genl_set_err_msg(struct genl_info *info, const struct nlattr *attr,
			    const char *msg)
{
	struct netlink_ext_ack *extack = info->extack;

	if (!extack)
		return;
	do_trace_netlink_extack(msg);
	extack->_msg = msg;
	if (attr)
		NL_SET_BAD_ATTR(extack, attr);
}

u8 sroce_genl_cmd(const struct genl_info *info)
{
	return info->genlhdr->cmd;
}

u8 sroce_genl_dump_cmd(struct netlink_callback *cb)
{
	return genl_info_dump(cb)->genlhdr->cmd;
}

unsigned long *sroce_genl_dump_cursor(struct netlink_callback *cb)
{
	return (unsigned long *)&cb->args[0];
}

/* The network namespace of the socket that asked for a dump. */
struct net *sroce_genl_dump_net(struct netlink_callback *cb)
{
	return sock_net(cb->skb->sk);
}

const void *sroce_nla_data(const struct nlattr *nla)
{
	return nla_data(nla);
}

int sroce_nla_len(const struct nlattr *nla)
{
	return nla_len(nla);
}

unsigned int sroce_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

const char *sroce_ib_device_name(const struct ib_device *ibdev)
{
	return dev_name(&ibdev->dev);
}

struct net_device *sroce_dev_by_addr4(struct net *net, __be32 addr)
{
	/* Under RCU, without a reference. */
	return __ip_dev_find(net, addr, false);
}

struct net_device *sroce_dev_by_addr6(struct net *net, const struct in6_addr *addr)
{
#if IS_ENABLED(CONFIG_IPV6)
	/* Under RCU, without a reference. */
	return ipv6_dev_find(net, addr, NULL);
#else
	return NULL;
#endif
}

struct nlattr *sroce_nla_nest_start(struct sk_buff *skb, int attrtype)
{
	return nla_nest_start_noflag(skb, attrtype);
}

void sroce_nla_nest_end(struct sk_buff *skb, struct nlattr *start)
{
	nla_nest_end(skb, start);
}

void sroce_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start)
{
	nla_nest_cancel(skb, start);
}

/* A spinlock taken with bottom halves disabled (rust/rdma/bh_lock.rs). */
void sroce_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void sroce_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

bool sroce_spin_trylock_bh(spinlock_t *lock)
{
	return spin_trylock_bh(lock);
}

/* Whether spin_lock_bh() may be called here. */
bool sroce_bh_lockable(void)
{
	return !in_hardirq() && !in_nmi() && !irqs_disabled();
}

void sroce_preempt_disable(void)
{
	preempt_disable();
}

void sroce_preempt_enable(void)
{
	preempt_enable();
}

void sroce_kthread_init_work(struct kthread_work *work, kthread_work_func_t fn)
{
	kthread_init_work(work, fn);
}

/*
 * Whether the worker's thread will run on another CPU than @cpu when woken:
 * it may not run on @cpu, or it is (or last was) on another one. A hint
 * read without locks: a sleeping thread's CPU is the one it last ran on.
 */
bool sroce_kthread_worker_elsewhere(struct kthread_worker *worker, unsigned int cpu)
{
	struct task_struct *task = worker->task;

	return task_cpu(task) != cpu || !cpumask_test_cpu(cpu, task->cpus_ptr);
}

unsigned int sroce_num_online_cpus(void)
{
	return num_online_cpus();
}

/*
 * On-demand paging. The RDMA core's ODP umem registers an MMU interval
 * notifier and faults pages in through HMM; sroce keeps its own
 * translation of the faulted pages (rust/rdma/mr_odp.rs), which the
 * invalidation below clears before the core lets the pages go.
 */
#if IS_ENABLED(CONFIG_INFINIBAND_ON_DEMAND_PAGING)
/* Rust: drops the translations of [start, end) (user addresses). */
void sroce_odp_invalidated(void *private, u64 start, u64 end);

static bool sroce_odp_invalidate(struct mmu_interval_notifier *mni,
				 const struct mmu_notifier_range *range,
				 unsigned long cur_seq)
{
	struct ib_umem_odp *odp = container_of(mni, struct ib_umem_odp, notifier);
	u64 start, end;

	/* The core's protocol (as in rxe): the umem mutex may sleep. */
	if (!mmu_notifier_range_blockable(range))
		return false;
	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	start = max_t(u64, ib_umem_start(odp), range->start);
	end = min_t(u64, ib_umem_end(odp), range->end);
	if (odp->private)
		sroce_odp_invalidated(odp->private, start, end);
	ib_umem_odp_unmap_dma_pages(odp, start, end);
	mutex_unlock(&odp->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops sroce_odp_ops = {
	.invalidate = sroce_odp_invalidate,
};

bool sroce_odp_available(void)
{
	return true;
}

struct ib_umem_odp *sroce_umem_odp_get(struct ib_device *dev, u64 addr,
				       u64 len, int access)
{
	return ib_umem_odp_get(dev, addr, len, access, &sroce_odp_ops);
}

/* Implicit ODP: a root umem for the whole address space, no notifier. */
/*
 * Implicit ODP: a root umem for the whole address space, no notifier. The
 * core keeps its mm without a reference until a child registers a
 * notifier; sroce holds one for the root's life, so that a child made
 * after the process exited finds the mm_struct (and no users) rather than
 * freed memory.
 */
struct ib_umem_odp *sroce_umem_odp_alloc_implicit(struct ib_device *dev,
						  int access)
{
	struct ib_umem_odp *odp = ib_umem_odp_alloc_implicit(dev, access);

	if (!IS_ERR(odp))
		mmgrab(odp->umem.owning_mm);
	return odp;
}

void sroce_umem_odp_release_implicit(struct ib_umem_odp *odp)
{
	struct mm_struct *mm = odp->umem.owning_mm;

	ib_umem_odp_release(odp);
	mmdrop(mm);
}

/* A piece of an implicit umem, with a notifier of its own. */
struct ib_umem_odp *sroce_umem_odp_alloc_child(struct ib_umem_odp *root,
					       u64 addr, u64 len)
{
	return ib_umem_odp_alloc_child(root, addr, len, &sroce_odp_ops);
}

void sroce_umem_odp_release(struct ib_umem_odp *odp)
{
	ib_umem_odp_release(odp);
}

void sroce_umem_odp_set_private(struct ib_umem_odp *odp, void *private)
{
	mutex_lock(&odp->umem_mutex);
	odp->private = private;
	mutex_unlock(&odp->umem_mutex);
}

/*
 * Faults [addr, addr + len) in (only looks up what is present unless
 * fault); on success returns with the umem mutex held.
 */
int sroce_umem_odp_fault_and_lock(struct ib_umem_odp *odp, u64 addr, u64 len,
				  bool write, bool fault)
{
	u64 access = HMM_PFN_VALID | (write ? HMM_PFN_WRITE : 0);
	int r = ib_umem_odp_map_dma_and_lock(odp, addr, len, access, fault);

	return r < 0 ? r : 0;
}

void sroce_umem_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

void sroce_umem_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

/* Page index of the umem (umem mutex held): the page, or NULL if absent. */
struct page *sroce_umem_odp_page(struct ib_umem_odp *odp, u64 index,
				 bool *writable)
{
	unsigned long pfn = odp->map.pfn_list[index];

	if (!(pfn & HMM_PFN_VALID))
		return NULL;
	*writable = pfn & HMM_PFN_WRITE;
	return hmm_pfn_to_page(pfn);
}

u64 sroce_umem_odp_start(struct ib_umem_odp *odp)
{
	return ib_umem_start(odp);
}

/* The device wrote to the page: its folio is dirty. */
void sroce_odp_page_written(struct page *page)
{
	folio_mark_dirty(page_folio(page));
}
#else
bool sroce_odp_available(void)
{
	return false;
}

struct ib_umem_odp *sroce_umem_odp_get(struct ib_device *dev, u64 addr,
				       u64 len, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

struct ib_umem_odp *sroce_umem_odp_alloc_implicit(struct ib_device *dev,
						  int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

struct ib_umem_odp *sroce_umem_odp_alloc_child(struct ib_umem_odp *root,
					       u64 addr, u64 len)
{
	return ERR_PTR(-EOPNOTSUPP);
}

void sroce_umem_odp_release(struct ib_umem_odp *odp) {}
void sroce_umem_odp_set_private(struct ib_umem_odp *odp, void *private) {}

int sroce_umem_odp_fault_and_lock(struct ib_umem_odp *odp, u64 addr, u64 len,
				  bool write, bool fault)
{
	return -EOPNOTSUPP;
}

void sroce_umem_odp_lock(struct ib_umem_odp *odp) {}
void sroce_umem_odp_unlock(struct ib_umem_odp *odp) {}
void sroce_umem_odp_release_implicit(struct ib_umem_odp *odp) {}

struct page *sroce_umem_odp_page(struct ib_umem_odp *odp, u64 index,
				 bool *writable)
{
	return NULL;
}

u64 sroce_umem_odp_start(struct ib_umem_odp *odp)
{
	return 0;
}

void sroce_odp_page_written(struct page *page) {}
#endif
