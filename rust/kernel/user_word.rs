// SPDX-License-Identifier: GPL-2.0

//! Single-word reads of user memory that fail instead of faulting.
//!
//! C header: [`include/linux/uaccess.h`](srctree/include/linux/uaccess.h)
//!
//! [`read`] is `get_user()`: it checks that the whole word is a user
//! address (`access_ok()`), and a fault on it is fixed up through the
//! exception table.  With page faults enabled a missing page is faulted in
//! (the caller may sleep); with page faults disabled (`pagefault_disable()`,
//! or in atomic context) the read fails with `EFAULT` instead.  Either way a
//! bad address is an error, never an oops, which is what walking an
//! untrusted user stack needs.  (`UserSliceReader` does the same for byte
//! ranges but needs a length-checked slice per read.)

use crate::{bindings, error::to_result, prelude::*, uaccess::UserPtr};

mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// A word that [`read`] can fetch.
pub trait UserWord: private::Sealed + Sized {
    #[doc(hidden)]
    fn get_user(addr: UserPtr) -> Result<Self>;
}

macro_rules! impl_user_word {
    ($t:ty, $get_user:ident) => {
        impl UserWord for $t {
            #[inline]
            fn get_user(addr: UserPtr) -> Result<$t> {
                let mut v: $t = 0;
                // SAFETY: `get_user()` accepts any user address: it checks
                // it with `access_ok()` and handles faults; `v` is a valid
                // destination.
                to_result(unsafe { bindings::$get_user(&mut v, addr.as_const_ptr().cast()) })?;
                Ok(v)
            }
        }
    };
}

impl_user_word!(u32, get_user_u32);
impl_user_word!(u64, get_user_u64);

/// Read one word of type `T` from user address `addr`.
///
/// Returns `EFAULT` if `addr` is not a user address or cannot be read.
/// May sleep unless page faults are disabled.
#[inline]
pub fn read<T: UserWord>(addr: UserPtr) -> Result<T> {
    T::get_user(addr)
}
