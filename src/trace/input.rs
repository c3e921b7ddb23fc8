//! Reading trace files: plain or gzip-compressed (the public traces ship as
//! `.csv.gz`), CSV rows with the position of each, and where a field starts
//! on its line so a bad value is reported as `file:line:column`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::{BadLine, TraceError};

/// Opens `path`, decompressing it when it starts with the gzip magic bytes.
pub fn open(path: &Path) -> Result<Box<dyn BufRead>, TraceError> {
    let io = |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = BufReader::with_capacity(1 << 16, File::open(path).map_err(io)?);
    let gzip = file.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
    if gzip {
        let decoder = flate2::bufread::MultiGzDecoder::new(file);
        Ok(Box::new(BufReader::with_capacity(1 << 16, decoder)))
    } else {
        Ok(Box::new(file))
    }
}

/// Where a CSV record starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowPosition {
    /// 1-based line.
    pub line: u64,
    /// Byte offset of the record in the (decompressed) input.
    pub byte: u64,
}

/// A CSV file read record by record.
pub struct CsvRows {
    path: PathBuf,
    reader: csv::Reader<Box<dyn BufRead>>,
}

impl CsvRows {
    /// Opens a CSV file; `headers` says whether its first row names the columns.
    pub fn open(path: &Path, headers: bool) -> Result<Self, TraceError> {
        let reader = csv::ReaderBuilder::new()
            .has_headers(headers)
            .flexible(true)
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(open(path)?);
        Ok(Self {
            path: path.to_path_buf(),
            reader,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header row, lower-cased.
    pub fn headers(&mut self) -> Result<Vec<String>, BadLine> {
        match self.reader.headers() {
            Ok(h) => Ok(h.iter().map(str::to_ascii_lowercase).collect()),
            Err(err) => Err(self.csv_error(&err)),
        }
    }

    /// Reads the next record into `record`: `Ok(None)` at the end, `Err` for a
    /// record that is not valid CSV (the reader can go on after it).
    pub fn read(
        &mut self,
        record: &mut csv::StringRecord,
    ) -> Result<Option<RowPosition>, Result<BadLine, TraceError>> {
        match self.reader.read_record(record) {
            Ok(false) => Ok(None),
            Ok(true) => {
                let pos = record
                    .position()
                    .map_or_else(RowPosition::default, |p| RowPosition {
                        line: p.line(),
                        byte: p.byte(),
                    });
                Ok(Some(pos))
            }
            Err(err) => match err.kind() {
                csv::ErrorKind::Io(_) => Err(Err(TraceError::Io {
                    path: self.path.clone(),
                    source: std::io::Error::other(err.to_string()),
                })),
                _ => Err(Ok(self.csv_error(&err))),
            },
        }
    }

    fn csv_error(&self, err: &csv::Error) -> BadLine {
        let line = err.position().map_or(0, csv::Position::line);
        BadLine {
            file: self.path.clone(),
            line,
            column: 1,
            message: err.to_string(),
        }
    }

    /// A bad value in field `field` (0-based) of the record at `pos`.
    pub fn bad(&self, pos: RowPosition, field: usize, message: impl Into<String>) -> BadLine {
        BadLine {
            file: self.path.clone(),
            line: pos.line,
            column: field_column(&self.path, pos.byte, field).unwrap_or(1),
            message: message.into(),
        }
    }
}

/// The 1-based character column where field `field` of the record starting
/// at byte `byte` begins. Reads the file again: only called for errors.
pub fn field_column(path: &Path, byte: u64, field: usize) -> Option<u64> {
    let mut input = open(path).ok()?;
    std::io::copy(&mut (&mut input).take(byte), &mut std::io::sink()).ok()?;
    let mut line = String::new();
    input.read_line(&mut line).ok()?;
    Some(column_in_line(&line, field))
}

/// The 1-based character column of field `field` in one CSV line (commas
/// inside double quotes do not separate fields).
pub fn column_in_line(line: &str, field: usize) -> u64 {
    let mut seen = 0;
    let mut quoted = false;
    for (i, c) in line.chars().enumerate() {
        if seen == field {
            // Leading blanks are trimmed from values: point at the value.
            if c != ' ' && c != '\t' {
                return i as u64 + 1;
            }
            continue;
        }
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => seen += 1,
            _ => {}
        }
    }
    line.trim_end_matches(['\n', '\r']).chars().count() as u64 + 1
}

/// Lines of a text file with their 1-based numbers (for JSONL).
pub fn lines(
    path: &Path,
) -> Result<impl Iterator<Item = (u64, std::io::Result<String>)>, TraceError> {
    Ok(open(path)?
        .lines()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_fields_outside_quotes() {
        let line = "12,app-1,\"a,b\", 4,x\n";
        assert_eq!(column_in_line(line, 0), 1);
        assert_eq!(column_in_line(line, 1), 4);
        assert_eq!(column_in_line(line, 2), 10);
        // The blank before 4 is skipped.
        assert_eq!(column_in_line(line, 3), 17);
        assert_eq!(column_in_line(line, 4), 19);
        // A field past the end points just after the line.
        assert_eq!(column_in_line(line, 9), 20);
    }

    #[test]
    fn gzip_and_plain_files_read_the_same() {
        use std::io::Write as _;
        let dir = std::env::temp_dir().join(format!("unisched-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("t.csv");
        std::fs::write(&plain, "a,b\n1,2\n").unwrap();
        let gz = dir.join("t.csv.gz");
        let mut enc =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(b"a,b\n1,2\n").unwrap();
        enc.finish().unwrap();
        for path in [&plain, &gz] {
            let mut text = String::new();
            open(path).unwrap().read_to_string(&mut text).unwrap();
            assert_eq!(text, "a,b\n1,2\n");
            assert_eq!(field_column(path, 4, 1), Some(3));
        }
        let mut rows = CsvRows::open(&gz, true).unwrap();
        assert_eq!(rows.headers().unwrap(), ["a", "b"]);
        let mut rec = csv::StringRecord::new();
        let pos = rows.read(&mut rec).ok().flatten().unwrap();
        assert_eq!((pos.line, pos.byte), (2, 4));
        assert_eq!(
            rows.bad(pos, 1, "x").to_string(),
            format!("{}:2:3: x", gz.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
