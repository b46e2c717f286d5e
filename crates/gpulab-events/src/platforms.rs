//! The OpenCL platforms a watched program's own loader gives it, as gpulab
//! tells its agent.
//!
//! Where the program's loader cannot load layers, gpulab preloads one that can,
//! and that loader may find the ICDs in another order or another number than
//! the program's own (ocl-icd reads no `OCL_ICD_FILENAMES`, and orders a
//! vendors folder its own way). gpulab asks the program's own loader first,
//! in a process of its own, and the agent then gives the program exactly those
//! platforms, in that order ([`ENV`]). A platform is known by what it says of
//! itself, the same through any loader: its name, vendor and version.

/// The variable that carries the list into the program.
pub const ENV: &str = "GPULAB_AGENT_PLATFORMS";

/// What a platform says of itself (`CL_PLATFORM_NAME`, `_VENDOR`,
/// `_VERSION`), as the bytes the driver wrote without their terminating NUL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlatformKey {
    pub name: Vec<u8>,
    pub vendor: Vec<u8>,
    pub version: Vec<u8>,
}

/// `CL_PLATFORM_VERSION`, `_NAME` and `_VENDOR`.
const VERSION: u32 = 0x0901;
const NAME: u32 = 0x0902;
const VENDOR: u32 = 0x0903;

impl PlatformKey {
    /// What a platform says of itself, through `query(param, buffer)`,
    /// which calls `clGetPlatformInfo` on it with the buffer (none when
    /// empty: a size query) and returns the size the driver gave, `None` on
    /// an error; a field it cannot answer is empty.
    pub fn asked(mut query: impl FnMut(u32, &mut [u8]) -> Option<usize>) -> PlatformKey {
        let mut field = |param| {
            let Some(size) = query(param, &mut []) else {
                return Vec::new();
            };
            let mut bytes = vec![0u8; size];
            if size > 0 && query(param, &mut bytes).is_none() {
                return Vec::new();
            }
            while bytes.last() == Some(&0) {
                bytes.pop();
            }
            bytes
        };
        PlatformKey {
            name: field(NAME),
            vendor: field(VENDOR),
            version: field(VERSION),
        }
    }

    /// The name, for a person.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// The list as one variable's value: each platform's three fields in hex,
/// separated by `.`, platforms by `,` (no byte of a driver's string can break
/// it, and an empty list is the empty string).
pub fn encode(keys: &[PlatformKey]) -> String {
    keys.iter()
        .map(|k| [&k.name, &k.vendor, &k.version].map(|f| hex(f)).join("."))
        .collect::<Vec<_>>()
        .join(",")
}

/// The list [`encode`] wrote; `None` for anything else.
pub fn decode(value: &str) -> Option<Vec<PlatformKey>> {
    if value.is_empty() {
        return Some(Vec::new());
    }
    value
        .split(',')
        .map(|platform| {
            let mut fields = platform.split('.').map(unhex);
            let key = PlatformKey {
                name: fields.next()??,
                vendor: fields.next()??,
                version: fields.next()??,
            };
            fields.next().is_none().then_some(key)
        })
        .collect()
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The bytes [`hex`] wrote; `None` for anything else.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// Which of `given` (a loader's platforms, each with its key) the program is
/// to see, in order, to see the platforms of `bare`: the k-th platform of a
/// key in `bare` is the k-th distinct one of that key in `given`, or the last
/// of them when `given` has fewer (one library a loader loads twice is one
/// platform named twice). `None` when a platform of `bare` is not in `given`.
pub fn arrange<H: Copy + PartialEq>(
    bare: &[PlatformKey],
    given: &[(H, PlatformKey)],
) -> Option<Vec<H>> {
    let mut out = Vec::with_capacity(bare.len());
    for (i, key) in bare.iter().enumerate() {
        let nth = bare[..i].iter().filter(|k| *k == key).count();
        let mut distinct: Vec<H> = Vec::new();
        for (handle, k) in given {
            if k == key && !distinct.contains(handle) {
                distinct.push(*handle);
            }
        }
        out.push(*distinct.get(nth).or(distinct.last())?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> PlatformKey {
        PlatformKey {
            name: name.into(),
            vendor: b"v".to_vec(),
            version: b"OpenCL 3.0".to_vec(),
        }
    }

    #[test]
    fn a_platform_is_asked_its_size_then_its_bytes_and_an_error_is_an_empty_field() {
        let said = PlatformKey::asked(|param, buffer| {
            let text: &[u8] = match param {
                NAME => b"PoCL\0",
                VENDOR => return None,
                _ => b"OpenCL 3.0\0\0",
            };
            if !buffer.is_empty() {
                buffer.copy_from_slice(text);
            }
            Some(text.len())
        });
        assert_eq!(
            said,
            PlatformKey {
                name: b"PoCL".to_vec(),
                vendor: Vec::new(),
                version: b"OpenCL 3.0".to_vec(),
            }
        );
    }

    #[test]
    fn any_bytes_survive_the_variable() {
        let odd = PlatformKey {
            name: b"a,b.c\0\n\xff".to_vec(),
            vendor: Vec::new(),
            version: (0..=255).collect(),
        };
        for keys in [
            vec![],
            vec![key("PoCL")],
            vec![odd, key(""), key("NVIDIA CUDA")],
        ] {
            let value = encode(&keys);
            assert!(
                value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b',')
            );
            assert_eq!(decode(&value), Some(keys));
        }
        for bad in [
            "x",
            "00.00",
            "00.00.00.00",
            "0.00.00",
            "zz.00.00",
            "00.00.00,",
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_program_sees_the_bare_order_whatever_order_the_loader_gives() {
        let (pocl, nv) = (key("PoCL"), key("NVIDIA CUDA"));
        let given = [(2, nv.clone()), (1, pocl.clone())];
        assert_eq!(
            arrange(&[pocl.clone(), nv.clone()], &given),
            Some(vec![1, 2])
        );
        assert_eq!(
            arrange(std::slice::from_ref(&nv), &given),
            Some(vec![2]),
            "one left out"
        );
        // A library the bare loader loads twice: the one platform, twice.
        assert_eq!(
            arrange(&[pocl.clone(), nv.clone(), pocl.clone()], &given),
            Some(vec![1, 2, 1])
        );
        // Two libraries saying the same: each once, in the loader's order.
        let twins = [(7, pocl.clone()), (8, pocl.clone())];
        assert_eq!(
            arrange(&[pocl.clone(), pocl.clone()], &twins),
            Some(vec![7, 8])
        );
        assert_eq!(arrange(&[key("Intel")], &given), None);
        assert_eq!(arrange::<u8>(&[], &[]), Some(vec![]));
    }
}
