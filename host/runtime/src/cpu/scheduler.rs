//! Tenants' shares of the compute slots: weighted fair queuing by tenant, live before shadow.
//!
//! There are as many slots as compute threads, and a guest call runs only while it holds one.
//! Each tenant has one [`CpuAccount`] with a virtual time: the CPU its calls used, divided by
//! its weight. A freed slot goes to the waiting call of the tenant whose virtual time is
//! lowest, so tenants that all want more CPU than there is get it in proportion to their
//! weights, whatever number of shards, subscriptions or shadows each runs: a tenant's calls
//! share one account. A tenant that was idle comes back at the virtual clock (the least
//! virtual time of the tenants running or waiting, never moving back), as CFS places a waking
//! task: first in line, but with no credit banked for the time it did not compete.
//!
//! Live calls come before shadow calls: a shadow's call is granted a slot only when no live
//! call of any tenant waits, and gives its slot up at its next preemption point as soon as
//! one does. A shadow's CPU is still charged to its tenant, so it runs inside its tenant's
//! share.
//!
//! The state is one mutex, taken when a call starts, at each preemption point (an epoch tick
//! of a running call), when a call blocks in an import and when it ends: a handful of times a
//! batch, never per record.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::Role;
use ruststream_common::sync::lock;

/// The weight a tenant has unless its limits say otherwise: cgroup v2's `cpu.weight` default.
pub const DEFAULT_CPU_WEIGHT: u32 = 100;

/// The slots and every account waiting for one.
pub(crate) struct Scheduler {
    slots: usize,
    state: Mutex<State>,
}

struct State {
    free: usize,
    /// The least virtual time of the accounts running or waiting, as last seen (it never
    /// moves back): where an idle account comes back.
    vclock: u64,
    next_id: u64,
    accounts: HashMap<u64, Entry>,
    /// Accounts with waiting calls, by role, ordered by (virtual time, id).
    ready: [BTreeSet<(u64, u64)>; 2],
    /// Accounts with calls running or waiting, by (virtual time, id).
    active: BTreeSet<(u64, u64)>,
    /// Accounts by tenant, so every instance of a tenant shares one.
    by_tenant: HashMap<String, Weak<CpuAccount>>,
}

struct Entry {
    weight: u64,
    vtime: u64,
    /// Calls holding a slot.
    running: usize,
    waiting: [VecDeque<Arc<Seat>>; 2],
}

impl Entry {
    fn is_active(&self) -> bool {
        self.running > 0 || self.waiting.iter().any(|queue| !queue.is_empty())
    }
}

/// One call's place in a queue: made once per instance and reused by its calls.
#[derive(Default)]
pub(crate) struct Seat {
    /// The scheduler handed it a slot, which it has not taken up yet.
    granted: AtomicBool,
    /// It is in its account's queue.
    queued: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Scheduler {
    pub(crate) fn new(slots: usize) -> Arc<Self> {
        let slots = slots.max(1);
        Arc::new(Self {
            slots,
            state: Mutex::new(State {
                free: slots,
                vclock: 0,
                next_id: 0,
                accounts: HashMap::new(),
                ready: [BTreeSet::new(), BTreeSet::new()],
                active: BTreeSet::new(),
                by_tenant: HashMap::new(),
            }),
        })
    }

    /// How many calls may run at once.
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The account of `tenant`, shared by all its calls on this host; `weight` (at least 1)
    /// replaces the one it had, so a reload's new limits apply from the next grant.
    pub(crate) fn account(self: &Arc<Self>, tenant: &str, weight: u32) -> Arc<CpuAccount> {
        let weight = u64::from(weight.max(1));
        let mut state = lock(&self.state);
        if let Some(account) = state.by_tenant.get(tenant).and_then(Weak::upgrade) {
            if let Some(entry) = state.accounts.get_mut(&account.id) {
                entry.weight = weight;
            }
            return account;
        }
        state
            .by_tenant
            .retain(|_, account| account.strong_count() > 0);
        let id = state.next_id;
        state.next_id += 1;
        let vclock = state.vclock;
        state.accounts.insert(
            id,
            Entry {
                weight,
                vtime: vclock,
                running: 0,
                waiting: [VecDeque::new(), VecDeque::new()],
            },
        );
        let account = Arc::new(CpuAccount {
            id,
            tenant: tenant.to_owned(),
            scheduler: self.clone(),
            usage: [Usage::default(), Usage::default()],
        });
        state
            .by_tenant
            .insert(tenant.to_owned(), Arc::downgrade(&account));
        account
    }

    /// What every tenant's calls used on this host so far.
    pub(crate) fn usage(&self) -> Vec<CpuUsage> {
        let accounts: Vec<Arc<CpuAccount>> = lock(&self.state)
            .by_tenant
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let mut usage: Vec<CpuUsage> = accounts
            .iter()
            .flat_map(|account| {
                Role::ALL.into_iter().map(|role| {
                    let used = &account.usage[role.index()];
                    CpuUsage {
                        tenant: account.tenant.clone(),
                        role,
                        cpu: Duration::from_nanos(used.cpu_ns.load(Ordering::Relaxed)),
                        waited: Duration::from_nanos(used.wait_ns.load(Ordering::Relaxed)),
                    }
                })
            })
            .collect();
        usage.sort_by(|a, b| (&a.tenant, a.role.index()).cmp(&(&b.tenant, b.role.index())));
        usage
    }
}

/// What one tenant's calls of one role used on a host: the CPU they ran and the time they
/// waited for a slot, since the host started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuUsage {
    /// The tenant.
    pub tenant: String,
    /// Live version or shadow.
    pub role: Role,
    /// CPU time its calls ran (the compute threads' own clocks).
    pub cpu: Duration,
    /// Time its calls were ready to run and waited for a compute slot.
    pub waited: Duration,
}

#[derive(Default)]
struct Usage {
    cpu_ns: AtomicU64,
    wait_ns: AtomicU64,
}

/// A tenant's share of the compute slots: its weight, its virtual time, its calls' queues.
pub struct CpuAccount {
    id: u64,
    tenant: String,
    scheduler: Arc<Scheduler>,
    usage: [Usage; 2],
}

impl std::fmt::Debug for CpuAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuAccount")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl Drop for CpuAccount {
    fn drop(&mut self) {
        let mut state = lock(&self.scheduler.state);
        if let Some(entry) = state.accounts.remove(&self.id) {
            for role in Role::ALL {
                state.ready[role.index()].remove(&(entry.vtime, self.id));
            }
            state.active.remove(&(entry.vtime, self.id));
        }
    }
}

impl CpuAccount {
    /// Takes a slot for a call of `role` seated at `seat`: at once when one is free, else
    /// when the scheduler grants it one (`cx` is woken then).
    pub(crate) fn poll_acquire(
        &self,
        role: Role,
        seat: &Arc<Seat>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if seat.granted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        let mut state = lock(&self.scheduler.state);
        // Granted between the check above and the lock.
        if seat.granted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        if seat.queued.load(Ordering::Acquire) {
            *lock(&seat.waker) = Some(cx.waker().clone());
            return Poll::Pending;
        }
        if state.free > 0 {
            state.free -= 1;
            state.start_running(self.id);
            return Poll::Ready(());
        }
        *lock(&seat.waker) = Some(cx.waker().clone());
        state.enqueue(self.id, role, seat.clone());
        Poll::Pending
    }

    /// Gives a held slot back: to the best waiting call, or to the free ones.
    pub(crate) fn release(&self) {
        let mut state = lock(&self.scheduler.state);
        state.stop_running(self.id);
        state.grant_next();
    }

    /// At a preemption point of a running call of `role` holding a slot: hands the slot to a
    /// waiting call with a better claim (a live call when this is a shadow's; a call of a
    /// tenant no further ahead in virtual time), queueing this one behind it. Returns whether
    /// it gave the slot up.
    pub(crate) fn preempt(&self, role: Role, seat: &Arc<Seat>) -> bool {
        let mut state = lock(&self.scheduler.state);
        let Some(mine) = state.accounts.get(&self.id).map(|e| e.vtime) else {
            return false;
        };
        let better = match role {
            Role::Live => state.ready[Role::Live.index()]
                .first()
                .is_some_and(|&(vtime, _)| vtime <= mine),
            Role::Shadow => {
                !state.ready[Role::Live.index()].is_empty()
                    || state.ready[Role::Shadow.index()]
                        .first()
                        .is_some_and(|&(vtime, _)| vtime <= mine)
            }
        };
        if !better {
            return false;
        }
        // Queued before it stops running: a preempted call is not back from idle.
        state.enqueue(self.id, role, seat.clone());
        state.stop_running(self.id);
        state.grant_next();
        true
    }

    /// Leaves the queue (a call dropped while waiting), or gives back a slot it was granted
    /// and never took up.
    pub(crate) fn leave(&self, role: Role, seat: &Arc<Seat>) {
        let mut state = lock(&self.scheduler.state);
        if seat.queued.swap(false, Ordering::AcqRel) {
            state.dequeue(self.id, role, seat);
        }
        if seat.granted.swap(false, Ordering::AcqRel) {
            // Granted: counted running since. Never taken up: the slot goes on.
            state.stop_running(self.id);
            state.grant_next();
        }
    }

    /// Charges `cpu` run by a call of `role` to the tenant: its virtual time moves by it
    /// over its weight.
    pub(crate) fn charge(&self, role: Role, cpu: Duration) {
        let ns = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
        self.usage[role.index()]
            .cpu_ns
            .fetch_add(ns, Ordering::Relaxed);
        let mut state = lock(&self.scheduler.state);
        state.charge(self.id, ns);
    }

    /// Notes that a call of `role` waited `waited` for a slot.
    pub(crate) fn waited(&self, role: Role, waited: Duration) {
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.usage[role.index()]
            .wait_ns
            .fetch_add(ns, Ordering::Relaxed);
    }

    /// Whether calls of `role` of this tenant are waiting for a slot now.
    pub fn is_waiting(&self, role: Role) -> bool {
        lock(&self.scheduler.state)
            .accounts
            .get(&self.id)
            .is_some_and(|entry| !entry.waiting[role.index()].is_empty())
    }

    /// The tenant it belongs to.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
}

impl State {
    /// Comes back from idle at the virtual clock: first in line among the accounts competing,
    /// with no credit for the time it did not compete. Call before it becomes active.
    fn place(&mut self, id: u64) {
        if let Some(&(least, _)) = self.active.first() {
            self.vclock = self.vclock.max(least);
        }
        let vclock = self.vclock;
        if let Some(entry) = self.accounts.get(&id)
            && !entry.is_active()
            && entry.vtime < vclock
        {
            self.set_vtime(id, vclock);
        }
    }

    /// Moves an account's virtual time, keeping every ordered set in step.
    fn set_vtime(&mut self, id: u64, vtime: u64) {
        let Some(entry) = self.accounts.get_mut(&id) else {
            return;
        };
        let before = std::mem::replace(&mut entry.vtime, vtime);
        for set in self.ready.iter_mut().chain([&mut self.active]) {
            if set.remove(&(before, id)) {
                set.insert((vtime, id));
            }
        }
    }

    /// Keeps `active` in step with whether the account runs or waits.
    fn refresh_active(&mut self, id: u64) {
        let Some(entry) = self.accounts.get(&id) else {
            return;
        };
        if entry.is_active() {
            self.active.insert((entry.vtime, id));
        } else {
            self.active.remove(&(entry.vtime, id));
        }
    }

    fn start_running(&mut self, id: u64) {
        self.place(id);
        if let Some(entry) = self.accounts.get_mut(&id) {
            entry.running += 1;
        }
        self.refresh_active(id);
    }

    fn stop_running(&mut self, id: u64) {
        if let Some(entry) = self.accounts.get_mut(&id) {
            entry.running = entry.running.saturating_sub(1);
        }
        self.refresh_active(id);
    }

    fn enqueue(&mut self, id: u64, role: Role, seat: Arc<Seat>) {
        self.place(id);
        let Some(entry) = self.accounts.get_mut(&id) else {
            return;
        };
        let vtime = entry.vtime;
        seat.queued.store(true, Ordering::Release);
        entry.waiting[role.index()].push_back(seat);
        self.ready[role.index()].insert((vtime, id));
        self.refresh_active(id);
    }

    fn dequeue(&mut self, id: u64, role: Role, seat: &Arc<Seat>) {
        let Some(entry) = self.accounts.get_mut(&id) else {
            return;
        };
        let queue = &mut entry.waiting[role.index()];
        queue.retain(|waiting| !Arc::ptr_eq(waiting, seat));
        if queue.is_empty() {
            self.ready[role.index()].remove(&(entry.vtime, id));
        }
        self.refresh_active(id);
    }

    /// Hands a freed slot to the first call of the account lowest in virtual time, live
    /// calls first; frees it when nobody waits.
    fn grant_next(&mut self) {
        for role in Role::ALL {
            while let Some(&(vtime, id)) = self.ready[role.index()].first() {
                let Some(entry) = self.accounts.get_mut(&id) else {
                    self.ready[role.index()].remove(&(vtime, id));
                    continue;
                };
                let queue = &mut entry.waiting[role.index()];
                let Some(seat) = queue.pop_front() else {
                    self.ready[role.index()].remove(&(vtime, id));
                    continue;
                };
                if queue.is_empty() {
                    self.ready[role.index()].remove(&(vtime, id));
                }
                entry.running += 1;
                seat.queued.store(false, Ordering::Release);
                seat.granted.store(true, Ordering::Release);
                if let Some(waker) = lock(&seat.waker).take() {
                    waker.wake();
                }
                return;
            }
        }
        self.free += 1;
    }

    fn charge(&mut self, id: u64, ns: u64) {
        let Some(entry) = self.accounts.get(&id) else {
            return;
        };
        let step = ns.saturating_mul(u64::from(DEFAULT_CPU_WEIGHT)) / entry.weight;
        let vtime = entry.vtime.saturating_add(step);
        self.set_vtime(id, vtime);
        // The clock follows the competition as it runs, so it holds where it was when
        // everybody goes idle.
        if let Some(&(least, _)) = self.active.first() {
            self.vclock = self.vclock.max(least);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn cx_of(count: &Arc<Count>) -> Waker {
        Waker::from(count.clone())
    }

    fn acquire(account: &CpuAccount, role: Role, seat: &Arc<Seat>) -> bool {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = cx_of(&count);
        account
            .poll_acquire(role, seat, &mut Context::from_waker(&waker))
            .is_ready()
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_free_slot_is_taken_at_once_and_a_full_host_queues() {
        let scheduler = Scheduler::new(1);
        let a = scheduler.account("a", 100);
        let b = scheduler.account("b", 100);
        let (sa, sb) = (Arc::new(Seat::default()), Arc::new(Seat::default()));
        assert!(acquire(&a, Role::Live, &sa));
        assert!(!acquire(&b, Role::Live, &sb), "the only slot is taken");
        assert!(b.is_waiting(Role::Live));
        a.release();
        assert!(acquire(&b, Role::Live, &sb), "handed over on release");
        assert!(!b.is_waiting(Role::Live));
    }

    /// Two tenants always wanting the CPU, one with eight calls and one with one: each gets
    /// half the slot time, counted in grants of equal slices.
    #[test]
    fn the_share_is_per_tenant_not_per_call() {
        let scheduler = Scheduler::new(1);
        let many = scheduler.account("many", 100);
        let one = scheduler.account("one", 100);
        let many_seats: Vec<Arc<Seat>> = (0..8).map(|_| Arc::new(Seat::default())).collect();
        let one_seat = Arc::new(Seat::default());
        // Everybody asks; the first of `many` gets the slot.
        let mut running: (Arc<CpuAccount>, Arc<Seat>) = (many.clone(), many_seats[0].clone());
        assert!(acquire(&many, Role::Live, &many_seats[0]));
        for seat in &many_seats[1..] {
            assert!(!acquire(&many, Role::Live, seat));
        }
        assert!(!acquire(&one, Role::Live, &one_seat));
        let mut slices = HashMap::<String, usize>::new();
        for _ in 0..1_000 {
            let (account, seat) = running.clone();
            account.charge(Role::Live, 5 * MS);
            *slices.entry(account.tenant().to_owned()).or_default() += 1;
            assert!(account.preempt(Role::Live, &seat), "somebody always waits");
            // Whoever was granted takes it up.
            let next = many_seats
                .iter()
                .map(|s| (many.clone(), s.clone()))
                .chain([(one.clone(), one_seat.clone())])
                .find(|(_, s)| s.granted.load(Ordering::Acquire));
            let Some((account, seat)) = next else {
                panic!("the slot went to nobody");
            };
            assert!(acquire(&account, Role::Live, &seat));
            running = (account, seat);
        }
        let (m, o) = (slices["many"], slices["one"]);
        assert!(m.abs_diff(o) <= 2, "many {m}, one {o}");
    }

    #[test]
    fn weights_divide_the_share() {
        let scheduler = Scheduler::new(1);
        let heavy = scheduler.account("heavy", 300);
        let light = scheduler.account("light", 100);
        let (sh, sl) = (Arc::new(Seat::default()), Arc::new(Seat::default()));
        assert!(acquire(&heavy, Role::Live, &sh));
        assert!(!acquire(&light, Role::Live, &sl));
        let mut running = (heavy.clone(), sh.clone());
        let mut slices = HashMap::<String, usize>::new();
        for _ in 0..400 {
            let (account, seat) = running.clone();
            account.charge(Role::Live, 5 * MS);
            *slices.entry(account.tenant().to_owned()).or_default() += 1;
            if account.preempt(Role::Live, &seat) {
                let next = if sh.granted.load(Ordering::Acquire) {
                    (heavy.clone(), sh.clone())
                } else {
                    (light.clone(), sl.clone())
                };
                assert!(acquire(&next.0, Role::Live, &next.1));
                running = next;
            }
        }
        let ratio = slices["heavy"] as f64 / slices["light"] as f64;
        assert!((2.7..=3.3).contains(&ratio), "{slices:?}");
    }

    #[test]
    fn a_shadow_runs_only_when_no_live_call_waits_and_yields_to_one() {
        let scheduler = Scheduler::new(1);
        let a = scheduler.account("a", 100);
        let b = scheduler.account("b", 100);
        let shadow = Arc::new(Seat::default());
        let live = Arc::new(Seat::default());
        assert!(acquire(&a, Role::Shadow, &shadow));
        // Not preempted while nobody waits.
        a.charge(Role::Shadow, 50 * MS);
        assert!(!a.preempt(Role::Shadow, &shadow));
        // A live call of another tenant, far ahead in virtual time, still wins.
        b.charge(Role::Live, 10_000 * MS);
        assert!(!acquire(&b, Role::Live, &live));
        assert!(a.preempt(Role::Shadow, &shadow));
        assert!(acquire(&b, Role::Live, &live));
        assert!(a.is_waiting(Role::Shadow));
        // Freed with both queues holding nobody live: the shadow gets it back.
        b.release();
        assert!(acquire(&a, Role::Shadow, &shadow));
    }

    #[test]
    fn an_idle_tenant_banks_no_credit() {
        let scheduler = Scheduler::new(1);
        let busy = scheduler.account("busy", 100);
        let idle = scheduler.account("idle", 100);
        let (sb, si) = (Arc::new(Seat::default()), Arc::new(Seat::default()));
        let other = Arc::new(Seat::default());
        assert!(acquire(&busy, Role::Live, &sb));
        // Busy runs alone for a long time, passing its slot between its own two calls.
        assert!(!acquire(&busy, Role::Live, &other));
        let mut running = sb.clone();
        for _ in 0..100 {
            busy.charge(Role::Live, 10 * MS);
            assert!(busy.preempt(Role::Live, &running), "its other call waits");
            running = if sb.granted.load(Ordering::Acquire) {
                sb.clone()
            } else {
                other.clone()
            };
            assert!(acquire(&busy, Role::Live, &running));
        }
        // The idle tenant comes back at the virtual clock, not at zero: it does not get the
        // next hundred slices in a row.
        assert!(!acquire(&idle, Role::Live, &si));
        let entry_vtime = |account: &CpuAccount| lock(&scheduler.state).accounts[&account.id].vtime;
        assert!(
            entry_vtime(&idle) >= 900 * 1_000_000,
            "{}",
            entry_vtime(&idle)
        );
    }

    /// A tenant that ran alone for a while, then went idle, is not put behind tenants that
    /// arrived meanwhile and took free slots: they start at the virtual clock, not at zero.
    #[test]
    fn tenants_taking_free_slots_start_at_the_virtual_clock() {
        let scheduler = Scheduler::new(2);
        let neighbour = scheduler.account("neighbour", 100);
        let seat = Arc::new(Seat::default());
        assert!(acquire(&neighbour, Role::Live, &seat));
        neighbour.charge(Role::Live, 700 * MS);
        neighbour.release();
        let spinners: Vec<_> = (0..2)
            .map(|n| {
                let account = scheduler.account(&format!("spinner{n}"), 100);
                let seat = Arc::new(Seat::default());
                assert!(acquire(&account, Role::Live, &seat), "a free slot");
                (account, seat)
            })
            .collect();
        assert!(
            !acquire(&neighbour, Role::Live, &seat),
            "both slots are taken"
        );
        let (spinner, spinner_seat) = &spinners[0];
        spinner.charge(Role::Live, 5 * MS);
        assert!(
            spinner.preempt(Role::Live, spinner_seat),
            "the neighbour is next after one slice"
        );
        assert!(acquire(&neighbour, Role::Live, &seat));
    }

    #[test]
    fn a_call_dropped_while_waiting_or_granted_loses_nobody_a_slot() {
        let scheduler = Scheduler::new(1);
        let a = scheduler.account("a", 100);
        let b = scheduler.account("b", 100);
        let c = scheduler.account("c", 100);
        let (sa, sb, sc) = (
            Arc::new(Seat::default()),
            Arc::new(Seat::default()),
            Arc::new(Seat::default()),
        );
        assert!(acquire(&a, Role::Live, &sa));
        assert!(!acquire(&b, Role::Live, &sb));
        assert!(!acquire(&c, Role::Live, &sc));
        b.leave(Role::Live, &sb);
        a.release();
        assert!(
            sc.granted.load(Ordering::Acquire),
            "b left the queue: c is next"
        );
        c.leave(Role::Live, &sc);
        // c never took up its slot: it is free again.
        assert!(acquire(&a, Role::Live, &sa));
    }

    #[test]
    fn accounts_are_shared_by_tenant_and_report_their_usage() {
        let scheduler = Scheduler::new(2);
        let first = scheduler.account("acme", 100);
        let second = scheduler.account("acme", 200);
        assert!(Arc::ptr_eq(&first, &second));
        first.charge(Role::Live, 3 * MS);
        second.charge(Role::Shadow, 2 * MS);
        first.waited(Role::Live, MS);
        let usage = scheduler.usage();
        assert_eq!(usage.len(), 2);
        assert_eq!(
            (usage[0].role, usage[0].cpu, usage[0].waited),
            (Role::Live, 3 * MS, MS)
        );
        assert_eq!((usage[1].role, usage[1].cpu), (Role::Shadow, 2 * MS));
        drop((first, second));
        assert!(scheduler.usage().is_empty());
    }
}
