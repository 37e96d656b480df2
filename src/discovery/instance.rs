//! [`ServiceInstance`]: curator-x-discovery's `ServiceInstance` as the JSON its default
//! `JsonInstanceSerializer` writes and reads (Jackson, Curator 5.x).
//!
//! The fields, in Curator's order: `name`, `id`, `address`, `port`, `sslPort`, `payload`,
//! `registrationTimeUTC` (milliseconds since the epoch), `serviceType` (`DYNAMIC`, `STATIC`,
//! `PERMANENT`, `DYNAMIC_SEQUENTIAL`), `uriSpec` (`{"parts":[{"value":..,"variable":..}]}`
//! or `null`), and `enabled` only when it was written (Curator's default serializer leaves it
//! out, for readers older than CURATOR-275). Unknown fields are ignored, as Curator does.
//!
//! The payload: Curator writes it with Jackson's `@JsonTypeInfo(use = CLASS)`, so a payload
//! that is a Java object (a bean, a map) is a JSON object with an `"@class"` field naming its
//! class; a `String`, `Boolean`, `Integer` or `Double` payload is the bare JSON value. Here the
//! payload is any [`serde_json::Value`] with the class apart ([`ServiceInstance::payload_class`]):
//! read, `"@class"` is taken out of an object payload; written, it is put back in. Interop
//! covers object payloads (a Java `Map` or bean whose class the reader has: Java reads an
//! object without `"@class"` as a `LinkedHashMap`) and the four bare scalars. Other Java types
//! (a `Long`, a `List`) Jackson writes as `["java.lang.Long", 5]`: they arrive here as that
//! array, and Java reads such an array back only if it names the class.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How an instance is registered (Curator's `ServiceType`): `Dynamic` as an ephemeral node
/// (gone with its session), `Static` and `Permanent` as persistent nodes.
///
/// ```
/// use zk_recipes::discovery::ServiceType;
/// assert_eq!(serde_json::to_string(&ServiceType::Dynamic).unwrap(), "\"DYNAMIC\"");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServiceType {
    /// An ephemeral node: the instance leaves with its session.
    #[default]
    Dynamic,
    /// A persistent node.
    Static,
    /// A persistent node (Curator keeps it across restarts).
    Permanent,
    /// Curator's ephemeral sequential node: read, never registered here.
    DynamicSequential,
}

/// One part of a [`UriSpec`]: literal text, or a variable's name.
///
/// ```
/// use zk_recipes::discovery::UriPart;
/// let part = UriPart { value: "port".into(), variable: true };
/// assert!(part.variable);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct UriPart {
    /// The text, or the variable's name.
    pub value: String,
    /// Whether `value` names a variable (`{name}` in the spec).
    pub variable: bool,
}

/// Curator's `UriSpec`: a URI template such as `{scheme}://{address}:{port}/api`, kept as its
/// parts.
///
/// ```
/// use zk_recipes::discovery::{ServiceInstance, UriSpec};
///
/// let spec = UriSpec::parse("{scheme}://{address}:{port}").unwrap();
/// let mut instance = ServiceInstance::new("billing", "a1");
/// instance.address = Some("10.0.0.7".into());
/// instance.port = Some(8080);
/// assert_eq!(spec.build(&instance, &Default::default()), "http://10.0.0.7:8080");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct UriSpec {
    /// The parts, in order.
    pub parts: Vec<UriPart>,
}

impl UriSpec {
    /// Parses a template as Curator does: `{name}` is a variable (its name trimmed), the rest
    /// literal text.
    ///
    /// # Errors
    ///
    /// What is wrong: a `{` inside a variable, a `}` without its `{`, a variable not closed.
    ///
    /// ```
    /// assert!(zk_recipes::discovery::UriSpec::parse("{scheme://x").is_err());
    /// ```
    pub fn parse(spec: &str) -> Result<UriSpec, &'static str> {
        let mut parts = Vec::new();
        let mut inside = false;
        let mut token = String::new();
        let mut push = |token: &mut String, variable: bool| {
            if !token.is_empty() {
                let value = if variable {
                    token.trim().to_owned()
                } else {
                    token.clone()
                };
                parts.push(UriPart { value, variable });
                token.clear();
            }
        };
        for c in spec.chars() {
            match c {
                '{' if inside => return Err("{ is not allowed inside of a variable specification"),
                '}' if !inside => return Err("} must be preceded by {"),
                '{' | '}' => {
                    push(&mut token, inside);
                    inside = c == '{';
                }
                c => token.push(c),
            }
        }
        if inside {
            return Err("final variable not closed: expected }");
        }
        push(&mut token, false);
        Ok(UriSpec { parts })
    }

    /// The URI for `instance`, with `variables` over the instance's own (`scheme`: `https`
    /// when it has an SSL port, else `http`; `name`, `id`, `address`, `port`, `ssl-port`,
    /// `registration-time-utc`, `service-type` in lower case; `[` and `]` for braces). An
    /// unknown variable is left out, as Curator does.
    ///
    /// ```
    /// use zk_recipes::discovery::{ServiceInstance, UriSpec};
    /// let spec = UriSpec::parse("{scheme}://{host}/").unwrap();
    /// let vars = [("host".to_owned(), "example.org".to_owned())].into();
    /// assert_eq!(spec.build(&ServiceInstance::new("s", "i"), &vars), "http://example.org/");
    /// ```
    pub fn build(&self, instance: &ServiceInstance, variables: &HashMap<String, String>) -> String {
        let number = |n: Option<u16>| n.map(|n| n.to_string()).unwrap_or_default();
        let own = |name: &str| -> Option<String> {
            Some(match name {
                "[" => "{".into(),
                "]" => "}".into(),
                "scheme" if instance.ssl_port.is_some() => "https".into(),
                "scheme" => "http".into(),
                "name" => instance.name.clone(),
                "id" => instance.id.clone(),
                "address" => instance.address.clone().unwrap_or_default(),
                "port" => number(instance.port),
                "ssl-port" => number(instance.ssl_port),
                "registration-time-utc" => instance.registration_time_utc.to_string(),
                "service-type" => instance.service_type.lower_name().into(),
                _ => return None,
            })
        };
        let mut uri = String::new();
        for part in &self.parts {
            if !part.variable {
                uri.push_str(&part.value);
            } else if let Some(value) = variables.get(&part.value) {
                uri.push_str(value);
            } else if let Some(value) = own(&part.value) {
                uri.push_str(&value);
            }
        }
        uri
    }
}

impl ServiceType {
    fn lower_name(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "dynamic",
            ServiceType::Static => "static",
            ServiceType::Permanent => "permanent",
            ServiceType::DynamicSequential => "dynamic_sequential",
        }
    }
}

/// A service instance as curator-x-discovery stores it at `{base}/{name}/{id}` (see the module
/// docs for the JSON and the payload's encoding).
///
/// ```
/// use zk_recipes::discovery::ServiceInstance;
///
/// let mut instance = ServiceInstance::new("billing", "a1");
/// instance.address = Some("10.0.0.7".into());
/// instance.port = Some(8080);
/// instance.payload = Some(serde_json::json!({"zone": "eu-1"}));
/// let json = instance.to_json();
/// assert_eq!(ServiceInstance::from_json(&json).unwrap(), instance);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "Wire", into = "Wire")]
pub struct ServiceInstance {
    /// The service's name (a node name).
    pub name: String,
    /// The instance's id, unique in the service (a node name).
    pub id: String,
    /// Its address (host name or IP).
    pub address: Option<String>,
    /// Its port.
    pub port: Option<u16>,
    /// Its SSL port.
    pub ssl_port: Option<u16>,
    /// The payload, `"@class"` taken out (see [`payload_class`](ServiceInstance::payload_class)).
    pub payload: Option<Value>,
    /// The Java class of an object payload (its `"@class"`), if it named one.
    pub payload_class: Option<String>,
    /// When it was registered, in milliseconds since the Unix epoch.
    pub registration_time_utc: i64,
    /// How it is registered.
    pub service_type: ServiceType,
    /// Its URI template.
    pub uri_spec: Option<UriSpec>,
    /// Curator's `enabled`, only when written (its default serializer leaves it out; Curator
    /// then reads `true`).
    pub enabled: Option<bool>,
}

impl ServiceInstance {
    /// An instance of service `name` with id `id`, registered now, [`ServiceType::Dynamic`],
    /// with nothing else set.
    ///
    /// ```
    /// let instance = zk_recipes::discovery::ServiceInstance::new("billing", "a1");
    /// assert!(instance.registration_time_utc > 0);
    /// ```
    pub fn new(name: impl Into<String>, id: impl Into<String>) -> ServiceInstance {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        ServiceInstance {
            name: name.into(),
            id: id.into(),
            address: None,
            port: None,
            ssl_port: None,
            payload: None,
            payload_class: None,
            registration_time_utc: now,
            service_type: ServiceType::Dynamic,
            uri_spec: None,
            enabled: None,
        }
    }

    /// The JSON Curator's `JsonInstanceSerializer` writes for this instance.
    ///
    /// ```
    /// let json = zk_recipes::discovery::ServiceInstance::new("s", "i").to_json();
    /// assert!(json.starts_with(br#"{"name":"s","id":"i","#));
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, numbers and `Value`s always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads an instance from the JSON Curator writes (unknown fields ignored).
    ///
    /// # Errors
    ///
    /// serde_json's, for what is no `ServiceInstance` JSON.
    ///
    /// ```
    /// use zk_recipes::discovery::ServiceInstance;
    /// let read = ServiceInstance::from_json(br#"{"name":"s","id":"i","payload":"text"}"#).unwrap();
    /// assert_eq!(read.payload, Some(serde_json::json!("text")));
    /// assert!(ServiceInstance::from_json(b"[]").is_err());
    /// ```
    pub fn from_json(json: &[u8]) -> Result<ServiceInstance, serde_json::Error> {
        serde_json::from_slice(json)
    }

    /// The instance's URI from its [`uri_spec`](ServiceInstance::uri_spec) (empty without one).
    ///
    /// ```
    /// let instance = zk_recipes::discovery::ServiceInstance::new("s", "i");
    /// assert_eq!(instance.uri(), "");
    /// ```
    pub fn uri(&self) -> String {
        match &self.uri_spec {
            Some(spec) => spec.build(self, &HashMap::new()),
            None => String::new(),
        }
    }
}

/// The JSON as Curator lays it out (its field order; `payload` with its `"@class"` inside).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    // Curator always writes both: without them a node is no instance.
    name: String,
    id: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    ssl_port: Option<u16>,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default, rename = "registrationTimeUTC")]
    registration_time_utc: i64,
    #[serde(default)]
    service_type: ServiceType,
    #[serde(default)]
    uri_spec: Option<UriSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
}

impl From<Wire> for ServiceInstance {
    fn from(wire: Wire) -> ServiceInstance {
        let (payload, payload_class) = match wire.payload {
            Some(Value::Object(mut object)) => {
                // A string "@class" is the class; anything else stays a field, in place.
                // shift_remove: the other fields keep Java's order (remove would swap).
                let class = match object.get("@class") {
                    Some(Value::String(_)) => match object.shift_remove("@class") {
                        Some(Value::String(class)) => Some(class),
                        _ => None,
                    },
                    _ => None,
                };
                (Some(Value::Object(object)), class)
            }
            // JSON null is Java's null: no payload.
            Some(Value::Null) | None => (None, None),
            Some(other) => (Some(other), None),
        };
        ServiceInstance {
            name: wire.name,
            id: wire.id,
            address: wire.address,
            port: wire.port,
            ssl_port: wire.ssl_port,
            payload,
            payload_class,
            registration_time_utc: wire.registration_time_utc,
            service_type: wire.service_type,
            uri_spec: wire.uri_spec,
            enabled: wire.enabled,
        }
    }
}

impl From<ServiceInstance> for Wire {
    fn from(instance: ServiceInstance) -> Wire {
        let payload = match (instance.payload, instance.payload_class) {
            (Some(Value::Object(object)), Some(class)) => {
                let mut with_class = Map::with_capacity(object.len() + 1);
                with_class.insert("@class".into(), Value::String(class));
                with_class.extend(object);
                Some(Value::Object(with_class))
            }
            (payload, _) => payload,
        };
        Wire {
            name: instance.name,
            id: instance.id,
            address: instance.address,
            port: instance.port,
            ssl_port: instance.ssl_port,
            payload,
            registration_time_utc: instance.registration_time_utc,
            service_type: instance.service_type,
            uri_spec: instance.uri_spec,
            enabled: instance.enabled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Written by Curator 5.4.0's `JsonInstanceSerializer` (Debian's libcurator-discovery-java),
    // from instances built with `ServiceInstance.builder()`.
    const MAP_PAYLOAD: &str = r#"{"name":"billing","id":"a1","address":"10.0.0.7","port":8080,"sslPort":8443,"payload":{"@class":"java.util.LinkedHashMap","zone":"eu-1","weight":3},"registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/api","variable":false}]}}"#;
    const NO_PAYLOAD: &str = r#"{"name":"billing","id":"b2","address":"10.0.0.8","port":null,"sslPort":null,"payload":null,"registrationTimeUTC":1700000000456,"serviceType":"STATIC","uriSpec":null}"#;
    const BEAN_PAYLOAD: &str = r#"{"name":"search","id":"c3","address":"host-c","port":9000,"sslPort":null,"payload":{"@class":"Samples$Details","description":"primary","weight":5},"registrationTimeUTC":1700000000789,"serviceType":"PERMANENT","uriSpec":null}"#;
    const TEXT_PAYLOAD: &str = r#"{"name":"search","id":"d4","address":"host-d","port":1,"sslPort":null,"payload":"just text","registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null}"#;
    // With `new JsonInstanceSerializer<>(Object.class, false)`: `enabled` written.
    const WITH_ENABLED: &str = r#"{"name":"search","id":"e5","address":"host-e","port":null,"sslPort":null,"payload":{"@class":"java.util.LinkedHashMap","zone":"eu-1","weight":3},"registrationTimeUTC":2,"serviceType":"DYNAMIC","uriSpec":null,"enabled":true}"#;

    #[test]
    fn reads_what_curator_writes_and_writes_it_back_byte_for_byte() {
        for sample in [
            MAP_PAYLOAD,
            NO_PAYLOAD,
            BEAN_PAYLOAD,
            TEXT_PAYLOAD,
            WITH_ENABLED,
        ] {
            let read = ServiceInstance::from_json(sample.as_bytes()).unwrap();
            assert_eq!(String::from_utf8(read.to_json()).unwrap(), sample);
        }
    }

    #[test]
    fn every_field_is_read() {
        let a = ServiceInstance::from_json(MAP_PAYLOAD.as_bytes()).unwrap();
        assert_eq!((a.name.as_str(), a.id.as_str()), ("billing", "a1"));
        assert_eq!(a.address.as_deref(), Some("10.0.0.7"));
        assert_eq!((a.port, a.ssl_port), (Some(8080), Some(8443)));
        assert_eq!(a.payload, Some(json!({"zone": "eu-1", "weight": 3})));
        assert_eq!(a.payload_class.as_deref(), Some("java.util.LinkedHashMap"));
        assert_eq!(a.registration_time_utc, 1_700_000_000_123);
        assert_eq!(a.service_type, ServiceType::Dynamic);
        assert_eq!(a.enabled, None);
        assert_eq!(a.uri(), "https://10.0.0.7:8080/api");
        let b = ServiceInstance::from_json(NO_PAYLOAD.as_bytes()).unwrap();
        assert_eq!((b.port, b.payload, b.uri_spec), (None, None, None));
        assert_eq!(b.service_type, ServiceType::Static);
        let c = ServiceInstance::from_json(BEAN_PAYLOAD.as_bytes()).unwrap();
        assert_eq!(c.payload_class.as_deref(), Some("Samples$Details"));
        assert_eq!(c.service_type, ServiceType::Permanent);
        let d = ServiceInstance::from_json(TEXT_PAYLOAD.as_bytes()).unwrap();
        assert_eq!(
            (d.payload, d.payload_class),
            (Some(json!("just text")), None)
        );
        let e = ServiceInstance::from_json(WITH_ENABLED.as_bytes()).unwrap();
        assert_eq!(e.enabled, Some(true));
    }

    #[test]
    fn unknown_fields_and_missing_ones_read_as_curator_reads_them() {
        let read = ServiceInstance::from_json(
            br#"{"name":"x","id":"y","serviceType":"DYNAMIC_SEQUENTIAL","extra":{"a":1}}"#,
        )
        .unwrap();
        assert_eq!(read.service_type, ServiceType::DynamicSequential);
        assert_eq!(read.registration_time_utc, 0);
        assert_eq!(read.address, None);
        assert!(ServiceInstance::from_json(b"not json").is_err());
        assert!(ServiceInstance::from_json(br#"{"serviceType":"OTHER"}"#).is_err());
        assert!(ServiceInstance::from_json(br#"{"port":70000}"#).is_err());
    }

    #[test]
    fn a_payload_without_a_class_is_written_without_one() {
        let mut instance = ServiceInstance::new("s", "i");
        instance.payload = Some(json!({"zone": "eu"}));
        let json: Value = serde_json::from_slice(&instance.to_json()).unwrap();
        assert_eq!(json["payload"], json!({"zone": "eu"}));
        instance.payload_class = Some("java.util.HashMap".into());
        let json: Value = serde_json::from_slice(&instance.to_json()).unwrap();
        assert_eq!(json["payload"]["@class"], "java.util.HashMap");
        // A class with a payload that is no object is not written (Jackson would not read it).
        instance.payload = Some(json!(5));
        let json: Value = serde_json::from_slice(&instance.to_json()).unwrap();
        assert_eq!(json["payload"], json!(5));
    }

    #[test]
    fn uri_specs_parse_and_build_as_curators() {
        let spec = UriSpec::parse("{scheme}://{ address }:{port}/{[}x{]}").unwrap();
        assert_eq!(spec.parts[2].value, "address");
        let mut instance = ServiceInstance::new("s", "i");
        instance.address = Some("h".into());
        instance.port = Some(80);
        assert_eq!(spec.build(&instance, &HashMap::new()), "http://h:80/{x}");
        let vars = [("scheme".to_owned(), "grpc".to_owned())].into();
        assert_eq!(spec.build(&instance, &vars), "grpc://h:80/{x}");
        let unknown = UriSpec::parse("a{nope}b").unwrap();
        assert_eq!(unknown.build(&instance, &HashMap::new()), "ab");
        for bad in ["{a{b}}", "a}", "{open"] {
            assert!(UriSpec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(UriSpec::parse("").unwrap().parts, []);
    }
}
