use leasehold::PropertyCodec;

const THREE: isize = 3;

#[derive(PropertyCodec)]
#[entity(int32, rename_all = "lowercase")]
enum Level {
    Low = 1,
    Mid,
    High = THREE,
    Huge = 3_000_000_000,
    #[entity(rename = "top")]
    Top = 4,
}

#[derive(PropertyCodec)]
#[entity(int32 = true)]
enum Flag {
    Off = 0,
}

fn main() {}
