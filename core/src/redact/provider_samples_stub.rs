//! TEMPORARY: one generated sample per provider the built-in rules know,
//! for the recall corpus. To be replaced at merge by the provider
//! scanner's own `provider_samples` (same signature).

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `n` characters drawn from `alphabet`.
    fn draw(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| char::from(alphabet[(self.next() % alphabet.len() as u64) as usize]))
            .collect()
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const URLSAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const HEX: &[u8] = b"0123456789abcdef";
const DIGITS: &[u8] = b"0123456789";
const UPPER32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// One valid-shaped token per provider of the built-in rules, drawn from
/// `seed`: (provider, token).
#[doc(hidden)]
pub fn provider_samples(seed: u64) -> Vec<(&'static str, String)> {
    let mut r = Rng(seed);
    vec![
        ("github", format!("ghp_{}", r.draw(ALNUM, 36))),
        ("gitlab", format!("glpat-{}", r.draw(URLSAFE, 20))),
        (
            "slack",
            format!(
                "xoxb-{}-{}-{}",
                r.draw(DIGITS, 11),
                r.draw(DIGITS, 13),
                r.draw(ALNUM, 24)
            ),
        ),
        ("stripe", format!("sk_live_{}", r.draw(ALNUM, 24))),
        ("google", format!("AIza{}", r.draw(URLSAFE, 35))),
        (
            "anthropic",
            format!("sk-ant-api03-{}AA", r.draw(URLSAFE, 93)),
        ),
        ("openai", format!("sk-proj-{}", r.draw(ALNUM, 48))),
        ("npm", format!("npm_{}", r.draw(ALNUM, 36))),
        (
            "pypi",
            format!("pypi-AgEIcHlwaS5vcmc{}", r.draw(URLSAFE, 60)),
        ),
        (
            "sendgrid",
            format!("SG.{}.{}", r.draw(URLSAFE, 22), r.draw(URLSAFE, 43)),
        ),
        ("digitalocean", format!("dop_v1_{}", r.draw(HEX, 64))),
        ("vault", format!("hvs.{}", r.draw(ALNUM, 24))),
        ("shopify", format!("shpat_{}", r.draw(HEX, 32))),
        ("huggingface", format!("hf_{}", r.draw(ALNUM, 34))),
        ("twilio", format!("SK{}", r.draw(HEX, 32))),
        (
            "telegram",
            format!("{}:AA{}", r.draw(DIGITS, 9), r.draw(URLSAFE, 33)),
        ),
        ("aws", format!("AKIA{}", r.draw(UPPER32, 16))),
        (
            "jwt",
            format!(
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{}.{}",
                r.draw(URLSAFE, 40),
                r.draw(URLSAFE, 43)
            ),
        ),
    ]
}
