//! Reading `kubectl get -o json` (or YAML) files for `drainer plan`, I/O: a List streamed item by
//! item, each decoded on its own as the watches do, what does not fit skipped and named.

use std::path::{Path, PathBuf};

use nodemedic_common::lenient::Lenient;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// A file that cannot be read as a List or an object at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Each YAML error as `file:line:column: message`, one a line.
    #[error("{errors}")]
    Yaml { path: PathBuf, errors: String },
    #[error("{}: {message}", path.display())]
    Decode { path: PathBuf, message: String },
}

impl ReadError {
    fn io(path: &Path, source: std::io::Error) -> ReadError {
        ReadError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn decode(path: &Path, e: impl std::fmt::Display) -> ReadError {
        ReadError::Decode {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

/// An object of a file that was skipped: the API server takes values our types cannot hold (a time
/// past 9999-12-30T22:00Z), and one such object must not stop the plan of every other, as it does not
/// stop `plan --live` or the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub(crate) file: std::path::PathBuf,
    /// 1-based position in the list.
    pub(crate) item: usize,
    /// `namespace/name` or `name`, when readable.
    pub(crate) id: String,
    pub(crate) error: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{}: skipped {} (item {}): cannot decode it: {}",
            self.file.display(),
            self.id,
            self.item,
            self.error
        )
    }
}

/// What a file held: the items read, and the ones skipped.
#[derive(Debug)]
pub struct Read<U> {
    pub(crate) items: Vec<U>,
    pub(crate) skipped: Vec<Skipped>,
}

impl<U> Read<U> {
    /// The items, with what was skipped added to `skipped`.
    pub fn items_noting(self, skipped: &mut Vec<Skipped>) -> Vec<U> {
        skipped.extend(self.skipped);
        self.items
    }
}

/// Read the `items` of a List file (`kubectl get nodes -o json`), or a single object; `-` is stdin.
pub fn read_items<T: DeserializeOwned + kube::Resource + 'static + k8s_openapi::Resource>(
    path: &Path,
) -> Result<Read<T>, ReadError> {
    read_items_map(path, |t: T| t)
}

/// [`read_items`], each item turned into what is kept (`f`) as soon as it is read: the file is parsed
/// once, as it streams in (no text copy, no `Value` of the whole list, no list of full objects), so
/// memory is what the kept values take. Each item is decoded on its own, as the watches do
/// ([`Lenient`]): one that does not fit its type is skipped and named in [`Read::skipped`]; a file
/// that is not JSON or YAML at all is an error with its position.
pub fn read_items_map<T: DeserializeOwned + kube::Resource + 'static + k8s_openapi::Resource, U>(
    path: &Path,
    mut f: impl FnMut(T) -> U,
) -> Result<Read<U>, ReadError> {
    let reader: Box<dyn std::io::Read> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(path).map_err(|e| ReadError::io(path, e))?)
    };
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, reader);
    // `kubectl get -o yaml` dumps are read whole through a JSON tree (YAML has no streaming reader
    // here); JSON, the large case, streams.
    let first = {
        use std::io::BufRead;
        let buf = reader.fill_buf().map_err(|e| ReadError::io(path, e))?;
        buf.iter().copied().find(|b| !b.is_ascii_whitespace())
    };
    if first.is_some_and(|b| b != b'{' && b != b'[') {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut reader, &mut text)
            .map_err(|e| ReadError::io(path, e))?;
        let value: serde_json::Value =
            nodemedic_common::yaml::parse_all(&text).map_err(|errors| ReadError::Yaml {
                path: path.to_path_buf(),
                errors: errors
                    .iter()
                    .map(|e| format!("{}:{}:{}: {}", path.display(), e.line, e.column, e.message))
                    .collect::<Vec<_>>()
                    .join("\n"),
            })?;
        let mut bad = Vec::new();
        let seed = ListOrOne {
            f: &mut f,
            bad: &mut bad,
            _t: std::marker::PhantomData,
        };
        let items = serde::de::DeserializeSeed::deserialize(seed, value)
            .map_err(|e| ReadError::decode(path, e))?;
        return readable::<T, U>(path, items, bad);
    }
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut bad = Vec::new();
    let seed = ListOrOne {
        f: &mut f,
        bad: &mut bad,
        _t: std::marker::PhantomData,
    };
    let items = serde::de::DeserializeSeed::deserialize(seed, &mut de)
        .and_then(|items| de.end().map(|()| items))
        .map_err(|e| ReadError::decode(path, e))?;
    readable::<T, U>(path, items, bad)
}

/// What was read, unless nothing was and something was skipped: a file of the wrong kind (pods
/// given as nodes) or of nothing readable is an error naming the file, not an empty plan.
fn readable<T: k8s_openapi::Resource, U>(
    path: &Path,
    items: Vec<U>,
    bad: Bad,
) -> Result<Read<U>, ReadError> {
    if items.is_empty()
        && let Some((item, id, error)) = bad.first()
    {
        let kind = T::KIND;
        return Err(ReadError::decode(
            path,
            format!(
                "nothing in it can be read as a {kind} ({} of {} items skipped; item {item}, {id}: {error})",
                bad.len(),
                bad.len()
            ),
        ));
    }
    Ok(Read {
        items,
        skipped: skipped(path, bad),
    })
}

/// (1-based item, id, error) of each malformed item.
type Bad = Vec<(usize, String, String)>;

fn skipped(path: &Path, bad: Bad) -> Vec<Skipped> {
    bad.into_iter()
        .map(|(item, id, error)| Skipped {
            file: path.to_path_buf(),
            item,
            id,
            error,
        })
        .collect()
}

/// One item, decoded leniently: kept through `f`, or noted in `bad`.
fn keep<T: kube::Resource, U>(
    item: Lenient<T>,
    n: usize,
    f: &mut impl FnMut(T) -> U,
    bad: &mut Bad,
) -> Option<U> {
    match item {
        Lenient::Ok(t) => Some(f(t)),
        Lenient::Malformed { ref error, .. } => {
            bad.push((n, item.id(), error.clone()));
            None
        }
    }
}

/// A List's `items`, each mapped as it is read, or one object.
struct ListOrOne<'f, T, F> {
    f: &'f mut F,
    bad: &'f mut Bad,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<'de, T: DeserializeOwned + kube::Resource + 'static, U, F: FnMut(T) -> U>
    serde::de::DeserializeSeed<'de> for ListOrOne<'_, T, F>
{
    type Value = Vec<U>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<U>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned + kube::Resource + 'static, U, F: FnMut(T) -> U>
    serde::de::Visitor<'de> for ListOrOne<'_, T, F>
{
    type Value = Vec<U>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes List (kubectl get -o json) or one object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Vec<U>, A::Error> {
        let mut items = None;
        let mut rest = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if k == "items" && items.is_none() {
                items = Some(map.next_value_seed(Items {
                    f: &mut *self.f,
                    bad: &mut *self.bad,
                    _t: std::marker::PhantomData,
                })?);
            } else {
                rest.insert(k, map.next_value::<serde_json::Value>()?);
            }
        }
        match items {
            Some(items) => Ok(items),
            None => Lenient::<T>::deserialize(serde_json::Value::Object(rest))
                .map(|one| keep(one, 1, self.f, self.bad).into_iter().collect())
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The `items` array, mapped element by element.
struct Items<'f, T, F> {
    f: &'f mut F,
    bad: &'f mut Bad,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<'de, T: DeserializeOwned + kube::Resource + 'static, U, F: FnMut(T) -> U>
    serde::de::DeserializeSeed<'de> for Items<'_, T, F>
{
    type Value = Vec<U>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<U>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: DeserializeOwned + kube::Resource + 'static, U, F: FnMut(T) -> U>
    serde::de::Visitor<'de> for Items<'_, T, F>
{
    type Value = Vec<U>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of objects")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<U>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let mut n = 0;
        while let Some(item) = seq.next_element::<Lenient<T>>()? {
            n += 1;
            out.extend(keep(item, n, self.f, self.bad));
        }
        Ok(out)
    }
}
