//! `Anchor` text parsing: any text either parses or names the field that is
//! wrong, and what parses prints back to text that parses to the same
//! anchor.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spillguard_core::audit::{Anchor, Key};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match text.parse::<Anchor>() {
        Ok(anchor) => {
            let printed = anchor.to_string();
            assert_eq!(printed.parse::<Anchor>(), Ok(anchor.clone()), "{printed}");
            // Its JSON form (a string) round-trips too.
            let json = serde_json::to_string(&anchor).expect("an anchor serialises");
            let back: Anchor = serde_json::from_str(&json).expect("its JSON parses");
            assert_eq!(back, anchor);
            // Checking a MAC never panics, whatever the fields.
            let _ = anchor.mac_matches(&Key::from_bytes([0x5a; 32]));
        }
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
