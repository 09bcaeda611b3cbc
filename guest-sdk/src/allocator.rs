//! The SDK's global allocator in a component: a free list per size class in front of the
//! system allocator (wasi-libc's dlmalloc).
//!
//! The canonical ABI hands each string and list of a `handle` call to the callee in a block of
//! the callee's own allocator (`cabi_realloc`), and the callee frees them all when the call
//! returns: five blocks a record, of the same few sizes, allocated and freed in turn. dlmalloc
//! spends ~360 instructions on each pair (`docs/benchmarks.md`); taking a block off a list and
//! putting it back costs ~110, the call to `cabi_realloc` included. The small strings and
//! vectors a handler builds and drops per record take the same path.
//!
//! A block of up to [`LARGEST`] bytes, aligned to at most 8, is rounded up to a power of two
//! (at least 8): its class. A freed block goes on its class's list while the list holds less
//! than [`KEPT_PER_CLASS`] bytes, and goes back to the system allocator otherwise; an
//! allocation of the class takes the last block freed. So at most `9 × 32 KiB` is kept free
//! beyond what dlmalloc would keep, all of it inside the component's memory and under its cap.
//! Larger or more aligned blocks are the system allocator's, as they are.
//!
//! The lists are not synchronised: the allocator is installed only where a component has a
//! single thread (`wasm32` without the `atomics` target feature). A tenant with a global
//! allocator of its own turns the SDK's `allocator` feature off.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;

/// The smallest class, as a shift: blocks of 8 bytes hold a free list's link on any target.
const SMALLEST_SHIFT: u32 = 3;
/// Number of classes: 8, 16, …, 2 048 bytes.
const CLASSES: usize = 9;
/// The largest block a class holds, in bytes.
pub const LARGEST: usize = 1 << (SMALLEST_SHIFT as usize + CLASSES - 1);
/// The strictest alignment a class serves: the system allocator's own (`malloc`'s).
const ALIGN: usize = 8;
/// The bytes a class keeps on its list at most; a block freed beyond that is the system's.
pub const KEPT_PER_CLASS: usize = 32 * 1024;

/// A free block: its first bytes link to the next one on its class's list.
struct Free {
    next: *mut Free,
}

#[derive(Clone, Copy)]
struct Class {
    head: *mut Free,
    kept: usize,
}

/// A free list per size class in front of [`System`] (see the module's docs).
pub struct Allocator {
    classes: UnsafeCell<[Class; CLASSES]>,
}

// SAFETY: the lists are touched without synchronisation, so the allocator is shared only where
// there is a single thread: a component on `wasm32` without the `atomics` target feature.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Sync for Allocator {}

impl Allocator {
    /// An allocator with every list empty.
    pub const fn new() -> Self {
        Self {
            classes: UnsafeCell::new(
                [Class {
                    head: ptr::null_mut(),
                    kept: 0,
                }; CLASSES],
            ),
        }
    }

    /// The bytes kept on the lists, free for the next allocations of their classes.
    pub fn kept(&self) -> usize {
        // SAFETY: a single thread (see `Sync`), and no reference into the lists outlives a call.
        let classes = unsafe { &*self.classes.get() };
        classes.iter().map(|class| class.kept).sum()
    }

    /// The class of `layout`, if a class serves it.
    fn class(layout: Layout) -> Option<usize> {
        if layout.size() > LARGEST || layout.align() > ALIGN {
            return None;
        }
        let size = layout.size().max(1 << SMALLEST_SHIFT);
        // The power of two at or above `size`, as a shift, counted from the smallest class.
        Some((usize::BITS - (size - 1).leading_zeros() - SMALLEST_SHIFT) as usize)
    }

    /// The layout of a block of class `class`, as the system allocator is asked for it.
    fn block(class: usize) -> Layout {
        // SAFETY: a power of two of at most `LARGEST` bytes, aligned to 8, is a valid layout.
        unsafe { Layout::from_size_align_unchecked(1 << (class + SMALLEST_SHIFT as usize), ALIGN) }
    }
}

impl Default for Allocator {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: a block handed out is either the system allocator's answer for the class's layout,
// which is at least as large and as aligned as the caller's, or a block of that class freed
// before (and so no longer the caller's); every block is given back to the system allocator with
// the layout it was allocated with.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(index) = Self::class(layout) else {
            return fresh(layout);
        };
        // SAFETY: a single thread, and nothing else holds a reference into the lists.
        let class = unsafe { &mut (*self.classes.get())[index] };
        let head = class.head;
        if head.is_null() {
            return fresh(Self::block(index));
        }
        // SAFETY: `head` is a free block of this class, its link written when it was freed.
        class.head = unsafe { (*head).next };
        class.kept -= Self::block(index).size();
        head.cast()
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(index) = Self::class(layout) else {
            // SAFETY: the caller's contract, passed on: a block of `layout` from `alloc`.
            return unsafe { give_back(ptr, layout) };
        };
        let block = Self::block(index);
        // SAFETY: a single thread, and nothing else holds a reference into the lists.
        let class = unsafe { &mut (*self.classes.get())[index] };
        if class.kept + block.size() > KEPT_PER_CLASS {
            // SAFETY: every block of a class was allocated with the class's layout.
            return unsafe { give_back(ptr, block) };
        }
        let free = ptr.cast::<Free>();
        // SAFETY: the block is the caller's no more, at least 8 bytes and aligned to 8.
        unsafe { free.write(Free { next: class.head }) };
        class.head = free;
        class.kept += block.size();
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::class(layout).is_none() {
            // SAFETY: the caller's contract, passed on; fresh pages come zeroed.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { self.alloc(layout) };
        if !ptr.is_null() {
            // SAFETY: the block holds at least `layout.size()` bytes.
            unsafe { ptr.write_bytes(0, layout.size()) };
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded to `layout.align()`, does not
        // overflow.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (Self::class(layout), Self::class(new)) {
            // SAFETY: the caller's contract, passed on: both are the system allocator's.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            // The block already holds the class's size.
            (Some(from), Some(to)) if from == to => ptr,
            _ => {
                // SAFETY: the caller's contract, passed on.
                let moved = unsafe { self.alloc(new) };
                if !moved.is_null() {
                    // SAFETY: both blocks hold at least the smaller size and do not overlap;
                    // `ptr` is the caller's block of `layout`, given up here.
                    unsafe {
                        ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                moved
            }
        }
    }
}

// The system allocator's paths are kept out of line: inlined, their stack frame and calls
// would be set up on the lists' paths too, which `cabi_realloc` and every drop inline.

/// A block of `layout` from the system allocator.
#[cold]
#[inline(never)]
fn fresh(layout: Layout) -> *mut u8 {
    // SAFETY: every layout the allocator passes here is non-zero-sized (classes are at least 8
    // bytes; other layouts are the caller's, as `GlobalAlloc::alloc` requires).
    unsafe { System.alloc(layout) }
}

/// Gives `ptr`, a block of `layout`, back to the system allocator.
///
/// # Safety
/// `ptr` was allocated by the system allocator with `layout` and is not used after.
#[cold]
#[inline(never)]
unsafe fn give_back(ptr: *mut u8, layout: Layout) {
    // SAFETY: the caller's.
    unsafe { System.dealloc(ptr, layout) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).expect("a valid layout")
    }

    fn alloc(allocator: &Allocator, size: usize) -> *mut u8 {
        // SAFETY: a valid, non-zero-sized layout.
        let ptr = unsafe { allocator.alloc(layout(size, 1)) };
        assert!(!ptr.is_null(), "{size} bytes");
        ptr
    }

    /// # Safety
    /// `ptr` is a block of `size` bytes from `allocator`, not used after.
    unsafe fn free(allocator: &Allocator, ptr: *mut u8, size: usize) {
        // SAFETY: the caller's.
        unsafe { allocator.dealloc(ptr, layout(size, 1)) }
    }

    /// # Safety
    /// `ptr` holds `len` initialised bytes.
    unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
        // SAFETY: the caller's.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    #[test]
    fn sizes_round_up_to_their_class_and_large_or_strict_blocks_have_none() {
        assert_eq!(Allocator::class(layout(0, 1)), Some(0));
        assert_eq!(Allocator::class(layout(8, 8)), Some(0));
        assert_eq!(Allocator::class(layout(9, 1)), Some(1));
        assert_eq!(Allocator::class(layout(27, 1)), Some(2));
        assert_eq!(Allocator::class(layout(LARGEST, 4)), Some(CLASSES - 1));
        assert_eq!(Allocator::class(layout(LARGEST + 1, 1)), None);
        assert_eq!(Allocator::class(layout(16, 16)), None);
        for size in 1..=LARGEST {
            let class = Allocator::class(layout(size, 1)).expect("a class");
            let block = Allocator::block(class).size();
            assert!(
                block >= size && (block == 8 || block / 2 < size),
                "{size} in {block}"
            );
        }
    }

    #[test]
    fn a_freed_block_is_the_next_one_of_its_class_and_the_others_keep_their_bytes() {
        let allocator = Allocator::new();
        let a = alloc(&allocator, 27);
        let b = alloc(&allocator, 30);
        assert_ne!(a, b);
        // SAFETY: `b` holds 30 bytes; `a` is not used after it is freed but as an address.
        unsafe {
            b.write_bytes(7, 30);
            free(&allocator, a, 27);
        }
        assert_eq!(allocator.kept(), 32);
        // The same class (32 bytes), another size: the block just freed.
        let c = alloc(&allocator, 17);
        assert_eq!(c, a);
        assert_eq!(allocator.kept(), 0);
        // SAFETY: `c` is a block of 17 bytes, not used after.
        unsafe { free(&allocator, c, 17) };
        // Another class is not served from this one's list.
        let d = alloc(&allocator, 64);
        assert_ne!(d, c);
        // SAFETY: `b` holds the 30 bytes written; both blocks are freed with their sizes.
        unsafe {
            assert_eq!(bytes(b, 30), &[7; 30]);
            free(&allocator, b, 30);
            free(&allocator, d, 64);
        }
    }

    #[test]
    fn a_class_keeps_what_its_cap_allows_and_gives_the_rest_back() {
        let allocator = Allocator::new();
        let blocks: Vec<_> = (0..KEPT_PER_CLASS / 1024 + 10)
            .map(|_| alloc(&allocator, 1000))
            .collect();
        for block in blocks {
            // SAFETY: each a block of 1 000 bytes, freed once.
            unsafe { free(&allocator, block, 1000) };
        }
        assert_eq!(allocator.kept(), KEPT_PER_CLASS);
        let large = alloc(&allocator, LARGEST * 4);
        // SAFETY: a block of that size, freed once.
        unsafe { free(&allocator, large, LARGEST * 4) };
        assert_eq!(
            allocator.kept(),
            KEPT_PER_CLASS,
            "a large block is never kept"
        );
    }

    #[test]
    fn reallocation_keeps_the_bytes_across_classes_and_the_block_within_one() {
        let allocator = Allocator::new();
        let mut ptr = alloc(&allocator, 5);
        // SAFETY: every block is used within its size and given back with it.
        unsafe {
            ptr::copy_nonoverlapping(b"hello".as_ptr(), ptr, 5);
            // 5 and 8 bytes are both the 8-byte class: the same block.
            assert_eq!(allocator.realloc(ptr, layout(5, 1), 8), ptr);
            let mut size = 8;
            for next in [100, LARGEST, LARGEST * 3, 40, 3] {
                ptr = allocator.realloc(ptr, layout(size, 1), next);
                assert!(!ptr.is_null());
                assert_eq!(bytes(ptr, 3), b"hel", "{size} → {next}");
                size = next;
            }
            free(&allocator, ptr, size);
        }
    }

    #[test]
    fn a_zeroed_block_is_zeroed_when_it_was_used_before() {
        let allocator = Allocator::new();
        let used = alloc(&allocator, 24);
        // SAFETY: `used` holds 24 bytes, given back once; `zeroed` the same.
        unsafe {
            used.write_bytes(0xff, 24);
            free(&allocator, used, 24);
            let zeroed = allocator.alloc_zeroed(layout(20, 4));
            assert_eq!(zeroed, used, "the block kept");
            assert_eq!(bytes(zeroed, 20), &[0; 20]);
            allocator.dealloc(zeroed, layout(20, 4));
        }
    }
}
