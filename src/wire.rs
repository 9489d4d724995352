//! PURE, a leaf: the wire spelling of a fieldless enum's variant, read from
//! its serde derive. The `rename_all` that spells a variant on the wire is
//! then also what the logs, the decision log and the pages say: no table
//! written beside the type can drift from it.

use serde::ser::{Impossible, Serialize, Serializer};

/// The spelling serde gives `value`'s variant, without allocating. Every
/// caller passes a fieldless enum, whose derive names each variant through
/// `serialize_unit_variant` (a `&'static str`, renamed); anything else
/// spells as `""`.
pub(crate) fn spelling<T: Serialize>(value: &T) -> &'static str {
    value.serialize(Spelling).unwrap_or("")
}

/// A serializer that accepts one unit variant and answers its name.
struct Spelling;

/// What [`Spelling`] answers for anything but a unit variant.
#[derive(Debug)]
struct NotAUnitVariant;

impl std::fmt::Display for NotAUnitVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a unit variant")
    }
}

impl std::error::Error for NotAUnitVariant {}

impl serde::ser::Error for NotAUnitVariant {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        NotAUnitVariant
    }
}

type Refused = Impossible<&'static str, NotAUnitVariant>;

/// The methods that refuse: every shape but a unit variant.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*);)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<&'static str, NotAUnitVariant> {
            Err(NotAUnitVariant)
        })*
    };
}

impl Serializer for Spelling {
    type Ok = &'static str;
    type Error = NotAUnitVariant;
    type SerializeSeq = Refused;
    type SerializeTuple = Refused;
    type SerializeTupleStruct = Refused;
    type SerializeTupleVariant = Refused;
    type SerializeMap = Refused;
    type SerializeStruct = Refused;
    type SerializeStructVariant = Refused;

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<&'static str, NotAUnitVariant> {
        Ok(variant)
    }

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<&'static str, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<&'static str, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<&'static str, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_tuple(self, _: usize) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Refused, NotAUnitVariant> {
        Err(NotAUnitVariant)
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::spelling;

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Spelled {
        NeedsApproval,
        #[serde(rename = "renamed-by-hand")]
        Renamed,
        #[allow(dead_code)]
        Carrying(u8),
    }

    #[test]
    fn a_variant_spells_as_serde_writes_it() {
        for (value, wire) in [
            (Spelled::NeedsApproval, "\"needs_approval\""),
            (Spelled::Renamed, "\"renamed-by-hand\""),
        ] {
            assert_eq!(format!("\"{}\"", spelling(&value)), wire);
            assert_eq!(serde_json::to_string(&value).unwrap(), wire);
        }
    }

    #[test]
    fn anything_else_spells_as_nothing() {
        assert_eq!(spelling(&Spelled::Carrying(1)), "");
        assert_eq!(spelling(&"text"), "");
        assert_eq!(spelling(&Some(Spelled::Renamed)), "");
    }
}
