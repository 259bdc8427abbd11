//! The provider token formats: one row per shape, written from each
//! provider's public description of its tokens (prefix, length, alphabet,
//! separators, checksum). Only shapes with a distinctive literal belong
//! here: a bare run of hex or base64 would fire on digests and ids.
//!
//! A row's rule name is `PROVIDER-KIND`; where a regex rule already covers
//! the provider (`github-token`, `stripe-key`, …) the row uses that rule's
//! name, so both count as one rule.

use super::Class::{
    Alnum, AnyBase64, Base64, Bech32, Bech32Upper, Digit, Hex, HexMixed, Label, Lower, Tilde,
    Upper, Url, UrlDot, Uuid,
};
use super::{Check, Class, Format, Part};

const fn run(class: Class, min: u16, max: u16) -> Part {
    Part::Run(class, min, max)
}

const fn n(class: Class, len: u16) -> Part {
    Part::Run(class, len, len)
}

const fn lit(text: &'static str) -> Part {
    Part::Lit(text)
}

/// A format: `anchor` then `parts`.
const fn f(
    provider: &'static str,
    name: &'static str,
    anchor: &'static str,
    parts: &'static [Part],
) -> Format {
    Format {
        provider,
        name,
        lead: None,
        anchor,
        parts,
        check: Check::None,
    }
}

impl Format {
    /// With a run before the anchor.
    const fn after(mut self, lead: Part) -> Self {
        self.lead = Some(lead);
        self
    }

    /// With a checksum.
    const fn checked(mut self, check: Check) -> Self {
        self.check = check;
        self
    }
}

const GH: &[Part] = &[n(Alnum, 36)];
const AWS_ID: &[Part] = &[n(Upper, 16)];
const GITLAB: &[Part] = &[run(UrlDot, 20, 300)];
const SLACK: &[Part] = &[run(Url, 20, 255)];
const DOPPLER: &[Part] = &[run(Alnum, 40, 44)];
const ANTHROPIC: &[Part] = &[n(Url, 93), lit("AA")];
const OPENAI: &[Part] = &[run(Url, 40, 256)];
const STRIPE: &[Part] = &[run(Alnum, 20, 247)];
const SHOPIFY: &[Part] = &[n(HexMixed, 32)];
const AWS_SESSION: &[Part] = &[run(Base64, 100, 2048)];
const SONAR: &[Part] = &[n(Hex, 40)];
const TAILSCALE: &[Part] = &[run(Alnum, 8, 24), lit("-"), run(Alnum, 24, 48)];
const UUID: &[Part] = &[n(Uuid, 36)];
const HARNESS: &[Part] = &[n(Url, 22), lit("."), n(Alnum, 24), lit("."), n(Alnum, 20)];
const PLANETSCALE: &[Part] = &[n(Url, 43)];

/// Every provider token format.
pub(crate) const FORMATS: &[Format] = &[
    // Amazon Web Services: access key ids by kind of principal.
    f("AWS", "aws-access-key-id", "AKIA", AWS_ID),
    f("AWS", "aws-access-key-id", "ASIA", AWS_ID),
    f("AWS", "aws-access-key-id", "ABIA", AWS_ID),
    f("AWS", "aws-access-key-id", "ACCA", AWS_ID),
    f("AWS", "aws-access-key-id", "AGPA", AWS_ID),
    f("AWS", "aws-access-key-id", "AIDA", AWS_ID),
    f("AWS", "aws-access-key-id", "AIPA", AWS_ID),
    f("AWS", "aws-access-key-id", "ANPA", AWS_ID),
    f("AWS", "aws-access-key-id", "ANVA", AWS_ID),
    f("AWS", "aws-access-key-id", "APKA", AWS_ID),
    f("AWS", "aws-access-key-id", "AROA", AWS_ID),
    f("AWS", "aws-access-key-id", "ASCA", AWS_ID),
    // An STS session token is base64 of a structure that begins the same way.
    f("AWS", "aws-session-token", "IQoJb3JpZ2luX2Vj", AWS_SESSION),
    f("AWS", "aws-session-token", "FwoGZXIvYXdz", AWS_SESSION),
    f(
        "Amazon Bedrock",
        "aws-bedrock-api-key",
        "ABSK",
        &[run(Base64, 100, 400)],
    ),
    f("Amazon MWS", "amazon-mws-token", "amzn.mws.", UUID),
    // Google.
    f("Google", "google-api-key", "AIza", &[n(Url, 35)]),
    f(
        "Google",
        "google-oauth-client-secret",
        "GOCSPX-",
        &[n(Url, 28)],
    ),
    f(
        "Google",
        "google-oauth-access-token",
        "ya29.",
        &[run(Url, 30, 2048)],
    ),
    f(
        "Google",
        "google-oauth-refresh-token",
        "1//0",
        &[run(Url, 40, 512)],
    ),
    f(
        "Firebase",
        "firebase-cloud-messaging-key",
        ":APA91b",
        &[run(Url, 130, 140)],
    )
    .after(n(Url, 11)),
    // Microsoft.
    f(
        "Microsoft Azure",
        "azure-ad-client-secret",
        "7Q~",
        &[run(Tilde, 31, 34)],
    )
    .after(n(Tilde, 3)),
    f(
        "Microsoft Azure",
        "azure-ad-client-secret",
        "8Q~",
        &[run(Tilde, 31, 34)],
    )
    .after(n(Tilde, 3)),
    f(
        "Microsoft Teams",
        "teams-webhook",
        ".webhook.office.com/webhookb2/",
        &[
            n(Uuid, 36),
            lit("@"),
            n(Uuid, 36),
            lit("/IncomingWebhook/"),
            n(Hex, 32),
            lit("/"),
            n(Uuid, 36),
        ],
    )
    .after(run(Label, 1, 63)),
    // Other clouds and hosts.
    f(
        "DigitalOcean",
        "digitalocean-token",
        "dop_v1_",
        &[n(Hex, 64)],
    ),
    f(
        "DigitalOcean",
        "digitalocean-token",
        "doo_v1_",
        &[n(Hex, 64)],
    ),
    f(
        "DigitalOcean",
        "digitalocean-token",
        "dor_v1_",
        &[n(Hex, 64)],
    ),
    f("Heroku", "heroku-api-key", "HRKU-", &[run(Url, 50, 70)]),
    f(
        "Alibaba Cloud",
        "alibaba-access-key-id",
        "LTAI",
        &[run(Alnum, 12, 20)],
    ),
    f(
        "Tencent Cloud",
        "tencent-secret-id",
        "AKID",
        &[n(Alnum, 32)],
    ),
    f(
        "Volcengine",
        "volcengine-access-key-id",
        "AKLT",
        &[run(Url, 30, 60)],
    ),
    f(
        "Yandex Cloud",
        "yandex-api-key",
        "AQVN",
        &[run(Url, 35, 38)],
    ),
    f("Scaleway", "scaleway-access-key-id", "SCW", &[n(Upper, 17)]),
    f("Fly.io", "fly-token", "fo1_", &[n(Url, 43)]),
    f("Fly.io", "fly-token", "fm2_", &[run(AnyBase64, 100, 4096)]),
    f("Netlify", "netlify-token", "nfp_", &[run(Alnum, 36, 40)]),
    f("Render", "render-api-key", "rnd_", &[n(Alnum, 32)]),
    f(
        "Cloudflare",
        "cloudflare-origin-ca-key",
        "v1.0-",
        &[n(Hex, 24), lit("-"), n(Hex, 146)],
    ),
    f(
        "Cloudflare",
        "cloudflare-tunnel-token",
        "eyJhIjoi",
        &[run(Base64, 100, 400)],
    ),
    f("Supabase", "supabase-access-token", "sbp_", &[n(Hex, 40)]),
    f(
        "Supabase",
        "supabase-secret-key",
        "sb_secret_",
        &[run(Url, 30, 64)],
    ),
    f(
        "PlanetScale",
        "planetscale-token",
        "pscale_tkn_",
        PLANETSCALE,
    ),
    f(
        "PlanetScale",
        "planetscale-password",
        "pscale_pw_",
        PLANETSCALE,
    ),
    f(
        "PlanetScale",
        "planetscale-oauth-token",
        "pscale_oauth_",
        PLANETSCALE,
    ),
    f("Neon", "neon-api-key", "napi_", &[run(Lower, 60, 72)]),
    f("Databricks", "databricks-token", "dapi", &[n(Hex, 32)]),
    f("Xata", "xata-api-key", "xau_", &[run(Alnum, 30, 40)]),
    f("Tailscale", "tailscale-key", "tskey-auth-", TAILSCALE),
    f("Tailscale", "tailscale-key", "tskey-api-", TAILSCALE),
    f("Tailscale", "tailscale-key", "tskey-client-", TAILSCALE),
    f("Tailscale", "tailscale-key", "tskey-webhook-", TAILSCALE),
    f(
        "Akamai",
        "akamai-client-token",
        "akab-",
        &[n(Lower, 16), lit("-"), n(Lower, 16)],
    ),
    f(
        "Rancher",
        "rancher-token",
        "token-",
        &[n(Lower, 5), lit(":"), n(Lower, 54)],
    ),
    // Source hosting and CI.
    f("GitHub", "github-token", "ghp_", GH).checked(Check::Crc32Base62),
    f("GitHub", "github-token", "gho_", GH).checked(Check::Crc32Base62),
    f("GitHub", "github-token", "ghu_", GH).checked(Check::Crc32Base62),
    f("GitHub", "github-token", "ghs_", GH).checked(Check::Crc32Base62),
    f("GitHub", "github-token", "ghr_", GH).checked(Check::Crc32Base62),
    f(
        "GitHub",
        "github-token",
        "github_pat_",
        &[n(Alnum, 22), lit("_"), n(Alnum, 59)],
    ),
    f("GitLab", "gitlab-token", "glpat-", GITLAB),
    f("GitLab", "gitlab-token", "gldt-", GITLAB),
    f("GitLab", "gitlab-token", "glrt-", GITLAB),
    f("GitLab", "gitlab-token", "glrtr-", GITLAB),
    f("GitLab", "gitlab-token", "glptt-", GITLAB),
    f("GitLab", "gitlab-token", "glsoat-", GITLAB),
    f("GitLab", "gitlab-token", "glcbt-", GITLAB),
    f("GitLab", "gitlab-token", "glimt-", GITLAB),
    f("GitLab", "gitlab-token", "glagent-", GITLAB),
    f("GitLab", "gitlab-token", "glffct-", GITLAB),
    f("GitLab", "gitlab-token", "gloas-", GITLAB),
    f("GitLab", "gitlab-token", "glft-", GITLAB),
    f("GitLab", "gitlab-token", "GR1348941", &[n(Url, 20)]),
    f(
        "Bitbucket",
        "bitbucket-app-password",
        "ATBB",
        &[run(Alnum, 28, 36)],
    ),
    f(
        "Atlassian",
        "atlassian-api-token",
        "ATATT",
        &[run(AnyBase64, 150, 300)],
    ),
    f(
        "Atlassian",
        "atlassian-api-token",
        "ATCTT",
        &[run(AnyBase64, 150, 300)],
    ),
    f("Trello", "trello-token", "ATTA", &[run(HexMixed, 64, 72)]),
    f(
        "CircleCI",
        "circleci-token",
        "CCIPAT_",
        &[n(Alnum, 22), lit("_"), n(Hex, 40)],
    ),
    f("Buildkite", "buildkite-token", "bkua_", &[n(Hex, 40)]),
    f("SonarQube", "sonar-token", "sqp_", SONAR),
    f("SonarQube", "sonar-token", "squ_", SONAR),
    f("SonarQube", "sonar-token", "sqa_", SONAR),
    f("Sourcegraph", "sourcegraph-token", "sgp_", &[n(Hex, 40)]),
    f(
        "Sourcegraph",
        "sourcegraph-token",
        "sgp_",
        &[n(Hex, 16), lit("_"), n(Hex, 40)],
    ),
    f("Harness", "harness-token", "pat.", HARNESS),
    f("Harness", "harness-token", "sat.", HARNESS),
    f("dbt Cloud", "dbt-cloud-token", "dbtc_", &[run(Url, 40, 80)]),
    f("Prefect", "prefect-api-key", "pnu_", &[n(Alnum, 36)]),
    f(
        "YouTrack",
        "youtrack-token",
        "perm:",
        &[
            run(Base64, 4, 64),
            lit("."),
            run(Base64, 4, 64),
            lit("."),
            run(Alnum, 20, 40),
        ],
    ),
    // Package registries.
    f("npm", "npm-token", "npm_", GH).checked(Check::Crc32Base62),
    f(
        "PyPI",
        "pypi-token",
        "pypi-AgEIcHlwaS5vcmc",
        &[run(Url, 50, 512)],
    ),
    f(
        "PyPI",
        "pypi-token",
        "pypi-AgENdGVzdC5weXBpLm9yZw",
        &[run(Url, 50, 512)],
    ),
    f("RubyGems", "rubygems-api-key", "rubygems_", &[n(Hex, 48)]),
    f("NuGet", "nuget-api-key", "oy2", &[n(Lower, 43)]),
    f("crates.io", "cratesio-token", "cio", &[n(Alnum, 32)]),
    f("Clojars", "clojars-token", "CLOJARS_", &[n(Hex, 60)]),
    f(
        "Docker Hub",
        "docker-hub-token",
        "dckr_pat_",
        &[run(Url, 24, 40)],
    ),
    f(
        "Docker Hub",
        "docker-hub-token",
        "dckr_oat_",
        &[run(Url, 24, 40)],
    ),
    f("JFrog", "jfrog-api-key", "AKCp", &[run(Alnum, 65, 73)]),
    f(
        "JFrog",
        "jfrog-reference-token",
        "cmVmdGtuOjAxOj",
        &[run(Alnum, 40, 72)],
    ),
    // Infrastructure and secrets managers.
    f(
        "Terraform Cloud",
        "terraform-cloud-token",
        ".atlasv1.",
        &[run(Url, 60, 70)],
    )
    .after(n(Alnum, 14)),
    f(
        "HashiCorp Vault",
        "vault-token",
        "hvs.",
        &[run(Url, 24, 512)],
    ),
    f(
        "HashiCorp Vault",
        "vault-token",
        "hvb.",
        &[run(Url, 24, 512)],
    ),
    f(
        "HashiCorp Vault",
        "vault-token",
        "hvr.",
        &[run(Url, 24, 512)],
    ),
    f("Doppler", "doppler-token", "dp.pt.", DOPPLER),
    f("Doppler", "doppler-token", "dp.ct.", DOPPLER),
    f("Doppler", "doppler-token", "dp.sa.", DOPPLER),
    f("Doppler", "doppler-token", "dp.scim.", DOPPLER),
    f("Doppler", "doppler-token", "dp.audit.", DOPPLER),
    f("Doppler", "doppler-token", "dp.st.", &[run(UrlDot, 40, 80)]),
    f("Pulumi", "pulumi-access-token", "pul-", &[n(Hex, 40)]),
    f("Infracost", "infracost-api-key", "ico-", &[n(Alnum, 32)]),
    f(
        "1Password",
        "onepassword-service-account-token",
        "ops_eyJ",
        &[run(AnyBase64, 100, 1024)],
    ),
    f(
        "1Password",
        "onepassword-secret-key",
        "A3-",
        &[
            n(Upper, 6),
            lit("-"),
            n(Upper, 6),
            lit("-"),
            n(Upper, 5),
            lit("-"),
            n(Upper, 5),
            lit("-"),
            n(Upper, 5),
            lit("-"),
            n(Upper, 5),
        ],
    ),
    f(
        "Age",
        "age-secret-key",
        "AGE-SECRET-KEY-1",
        &[n(Bech32Upper, 58)],
    )
    .checked(Check::Bech32),
    f("Nostr", "nostr-secret-key", "nsec1", &[n(Bech32, 58)]).checked(Check::Bech32),
    // Observability.
    f(
        "Postman",
        "postman-api-key",
        "PMAK-",
        &[n(Hex, 24), lit("-"), n(Hex, 34)],
    ),
    f(
        "Sentry",
        "sentry-org-token",
        "sntrys_",
        &[run(AnyBase64, 60, 512)],
    ),
    f("Sentry", "sentry-user-token", "sntryu_", &[n(Hex, 64)]),
    f(
        "Grafana",
        "grafana-cloud-token",
        "glc_eyJ",
        &[run(Base64, 40, 400)],
    ),
    f(
        "Grafana",
        "grafana-service-account-token",
        "glsa_",
        &[n(Alnum, 32), lit("_"), n(Hex, 8)],
    ),
    f(
        "New Relic",
        "newrelic-user-api-key",
        "NRAK-",
        &[n(Upper, 27)],
    ),
    f("New Relic", "newrelic-insert-key", "NRII-", &[n(Url, 32)]),
    f("New Relic", "newrelic-query-key", "NRIQ-", &[n(Url, 32)]),
    f("New Relic", "newrelic-browser-key", "NRJS-", &[n(Hex, 19)]),
    f("New Relic", "newrelic-license-key", "NRAL", &[]).after(n(Hex, 36)),
    f(
        "Dynatrace",
        "dynatrace-token",
        "dt0c01.",
        &[n(Upper, 24), lit("."), n(Upper, 64)],
    ),
    f(
        "Dynatrace",
        "dynatrace-token",
        "dt0s01.",
        &[n(Upper, 24), lit("."), n(Upper, 64)],
    ),
    f(
        "Elastic",
        "elastic-cloud-api-key",
        "essu_",
        &[run(Base64, 60, 140)],
    ),
    f(
        "PostHog",
        "posthog-personal-api-key",
        "phx_",
        &[run(Alnum, 40, 48)],
    ),
    f("Honeybadger", "honeybadger-token", "hbp_", &[n(Alnum, 36)]),
    // Work and collaboration.
    f("Linear", "linear-api-key", "lin_api_", &[n(Alnum, 40)]),
    f("Linear", "linear-oauth-token", "lin_oauth_", &[n(Hex, 64)]),
    f("Notion", "notion-token", "secret_", &[n(Alnum, 43)]),
    f("Notion", "notion-token", "ntn_", &[run(Alnum, 40, 50)]),
    f(
        "Airtable",
        "airtable-token",
        "pat",
        &[n(Alnum, 14), lit("."), n(Hex, 64)],
    ),
    f("Figma", "figma-token", "figd_", &[run(Url, 38, 44)]),
    f("Contentful", "contentful-token", "CFPAT-", &[n(Url, 43)]),
    f("ReadMe", "readme-api-key", "rdme_", &[run(Lower, 64, 72)]),
    f("Frame.io", "frameio-token", "fio-u-", &[n(Url, 64)]),
    f("Typeform", "typeform-token", "tfp_", &[run(UrlDot, 50, 70)]),
    f(
        "ClickUp",
        "clickup-token",
        "pk_",
        &[run(Digit, 6, 9), lit("_"), n(Upper, 32)],
    ),
    f("HubSpot", "hubspot-token", "pat-na1-", UUID),
    f("HubSpot", "hubspot-token", "pat-eu1-", UUID),
    f(
        "Intercom",
        "intercom-token",
        "dG9rOj",
        &[run(AnyBase64, 40, 80)],
    ),
    f(
        "Salesforce",
        "salesforce-access-token",
        "00D",
        &[run(Alnum, 12, 15), lit("!"), run(UrlDot, 80, 120)],
    ),
    f(
        "Zoho",
        "zoho-token",
        "1000.",
        &[n(Hex, 32), lit("."), n(Hex, 32)],
    ),
    f("Adobe", "adobe-client-secret", "p8e-", &[n(Url, 32)]),
    f("Dropbox", "dropbox-token", "sl.", &[run(UrlDot, 130, 1500)]),
    f("Deno Deploy", "deno-deploy-token", "ddp_", &[n(Alnum, 36)]),
    // Commerce and payments.
    f("Shopify", "shopify-token", "shpat_", SHOPIFY),
    f("Shopify", "shopify-token", "shpca_", SHOPIFY),
    f("Shopify", "shopify-token", "shppa_", SHOPIFY),
    f("Shopify", "shopify-token", "shpss_", SHOPIFY),
    f("Stripe", "stripe-key", "sk_live_", STRIPE),
    f("Stripe", "stripe-key", "sk_test_", STRIPE),
    f("Stripe", "stripe-key", "rk_live_", STRIPE),
    f("Stripe", "stripe-key", "rk_test_", STRIPE),
    f(
        "Stripe",
        "stripe-webhook-secret",
        "whsec_",
        &[run(Alnum, 32, 64)],
    ),
    f("Square", "square-access-token", "sq0atp-", &[n(Url, 22)]),
    f("Square", "square-oauth-secret", "sq0csp-", &[n(Url, 43)]),
    f("Square", "square-access-token", "EAAA", &[n(Url, 60)]),
    f(
        "Braintree",
        "braintree-access-token",
        "access_token$production$",
        &[n(Lower, 16), lit("$"), n(Hex, 32)],
    ),
    f(
        "Braintree",
        "braintree-access-token",
        "access_token$sandbox$",
        &[n(Lower, 16), lit("$"), n(Hex, 32)],
    ),
    f("Plaid", "plaid-access-token", "access-production-", UUID),
    f("Plaid", "plaid-access-token", "access-sandbox-", UUID),
    f("Plaid", "plaid-access-token", "access-development-", UUID),
    f(
        "Flutterwave",
        "flutterwave-secret-key",
        "FLWSECK-",
        &[n(Hex, 32), lit("-X")],
    ),
    f(
        "Flutterwave",
        "flutterwave-secret-key",
        "FLWSECK_TEST-",
        &[n(Hex, 32), lit("-X")],
    ),
    f(
        "Paddle",
        "paddle-api-key",
        "pdl_live_apikey_",
        &[run(Url, 40, 64)],
    ),
    f(
        "Paddle",
        "paddle-api-key",
        "pdl_sdbx_apikey_",
        &[run(Url, 40, 64)],
    ),
    f("Shippo", "shippo-token", "shippo_live_", &[n(Hex, 40)]),
    f("Shippo", "shippo-token", "shippo_test_", &[n(Hex, 40)]),
    f("EasyPost", "easypost-api-key", "EZAK", &[n(Alnum, 54)]),
    f("EasyPost", "easypost-api-key", "EZTK", &[n(Alnum, 54)]),
    f("Duffel", "duffel-token", "duffel_live_", &[n(Url, 43)]),
    f("Duffel", "duffel-token", "duffel_test_", &[n(Url, 43)]),
    f(
        "Mapbox",
        "mapbox-secret-token",
        "sk.eyJ",
        &[run(Url, 50, 400), lit("."), n(Url, 22)],
    ),
    // Messaging and email.
    f("Slack", "slack-token", "xoxb-", SLACK),
    f("Slack", "slack-token", "xoxp-", SLACK),
    f("Slack", "slack-token", "xoxa-", SLACK),
    f("Slack", "slack-token", "xoxo-", SLACK),
    f("Slack", "slack-token", "xoxs-", SLACK),
    f("Slack", "slack-token", "xoxr-", SLACK),
    f("Slack", "slack-token", "xoxe-", SLACK),
    f(
        "Slack",
        "slack-token",
        "xapp-",
        &[
            n(Digit, 1),
            lit("-"),
            run(Upper, 9, 12),
            lit("-"),
            run(Digit, 10, 14),
            lit("-"),
            n(Hex, 64),
        ],
    ),
    f(
        "Discord",
        "discord-webhook",
        "https://discord.com/api/webhooks/",
        &[run(Digit, 17, 20), lit("/"), run(Url, 60, 68)],
    ),
    f(
        "Discord",
        "discord-webhook",
        "https://discordapp.com/api/webhooks/",
        &[run(Digit, 17, 20), lit("/"), run(Url, 60, 68)],
    ),
    f("Telegram", "telegram-bot-token", ":AA", &[n(Url, 33)]).after(run(Digit, 8, 10)),
    f("Twilio", "twilio-key", "SK", &[n(Hex, 32)]),
    f("Twilio", "twilio-key", "AC", &[n(Hex, 32)]),
    f(
        "SendGrid",
        "sendgrid-key",
        "SG.",
        &[n(Url, 22), lit("."), n(Url, 43)],
    ),
    f("Mailgun", "mailgun-api-key", "key-", &[n(Hex, 32)]),
    f("Mailchimp", "mailchimp-api-key", "-us", &[run(Digit, 1, 2)]).after(n(Hex, 32)),
    f(
        "Brevo",
        "brevo-api-key",
        "xkeysib-",
        &[n(Hex, 64), lit("-"), n(Alnum, 16)],
    ),
    f(
        "Brevo",
        "brevo-smtp-key",
        "xsmtpsib-",
        &[n(Hex, 64), lit("-"), n(Alnum, 16)],
    ),
    f(
        "Resend",
        "resend-api-key",
        "re_",
        &[n(Alnum, 8), lit("_"), n(Alnum, 24)],
    ),
    f("MailerSend", "mailersend-token", "mlsn.", &[n(Hex, 64)]),
    f("Meta", "meta-access-token", "EAAB", &[run(Alnum, 100, 512)]),
    f("Meta", "meta-access-token", "EAAG", &[run(Alnum, 100, 512)]),
    f(
        "Instagram",
        "instagram-access-token",
        "IGQV",
        &[run(Url, 100, 400)],
    ),
    f("Riot Games", "riot-games-api-key", "RGAPI-", UUID),
    f(
        "Cloudinary",
        "cloudinary-url",
        "cloudinary://",
        &[run(Digit, 12, 16), lit(":"), run(Url, 20, 40)],
    ),
    // AI platforms.
    f("OpenAI", "openai-key", "sk-proj-", OPENAI),
    f("OpenAI", "openai-key", "sk-svcacct-", OPENAI),
    f("OpenAI", "openai-key", "sk-admin-", OPENAI),
    f(
        "OpenAI",
        "openai-key",
        "sk-",
        &[n(Alnum, 20), lit("T3BlbkFJ"), n(Alnum, 20)],
    ),
    f("Anthropic", "anthropic-key", "sk-ant-api03-", ANTHROPIC),
    f("Anthropic", "anthropic-key", "sk-ant-admin01-", ANTHROPIC),
    f(
        "Anthropic",
        "anthropic-key",
        "sk-ant-oat01-",
        &[run(Url, 80, 128)],
    ),
    f(
        "Anthropic",
        "anthropic-key",
        "sk-ant-ort01-",
        &[run(Url, 80, 128)],
    ),
    f("Hugging Face", "huggingface-token", "hf_", &[n(Alnum, 34)]),
    f(
        "Hugging Face",
        "huggingface-token",
        "api_org_",
        &[n(Alnum, 34)],
    ),
    f("Replicate", "replicate-api-token", "r8_", &[n(Alnum, 37)]),
    f("Groq", "groq-api-key", "gsk_", &[n(Alnum, 52)]),
    f("Perplexity", "perplexity-api-key", "pplx-", &[n(Alnum, 48)]),
    f("xAI", "xai-api-key", "xai-", &[n(Alnum, 80)]),
    f(
        "LangSmith",
        "langsmith-api-key",
        "lsv2_pt_",
        &[n(Hex, 32), lit("_"), n(Hex, 10)],
    ),
    f(
        "LangSmith",
        "langsmith-api-key",
        "lsv2_sk_",
        &[n(Hex, 32), lit("_"), n(Hex, 10)],
    ),
    f(
        "Pinecone",
        "pinecone-api-key",
        "pcsk_",
        &[run(Alnum, 4, 8), lit("_"), run(Alnum, 50, 80)],
    ),
    f("ElevenLabs", "elevenlabs-api-key", "sk_", &[n(Hex, 48)]),
    f("Tavily", "tavily-api-key", "tvly-", &[run(Url, 32, 48)]),
    f("Firecrawl", "firecrawl-api-key", "fc-", &[n(Hex, 32)]),
    f("Cerebras", "cerebras-api-key", "csk-", &[n(Lower, 48)]),
    f("NVIDIA", "nvidia-api-key", "nvapi-", &[n(Url, 64)]),
    f("Jina AI", "jina-api-key", "jina_", &[run(Alnum, 50, 70)]),
    f("DeepL", "deepl-api-key", ":fx", &[]).after(n(Uuid, 36)),
];
