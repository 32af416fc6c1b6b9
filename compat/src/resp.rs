//! Just enough of redis's protocol (RESP2) to check a dataset: commands as
//! arrays of bulk strings, replies parsed into [`Value`].

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

/// One connection.
pub struct Redis {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Redis {
    pub fn connect(port: u16) -> io::Result<Redis> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Redis {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends the commands in one write, then reads one reply per command.
    pub fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> io::Result<Vec<Value>> {
        let mut out = Vec::new();
        for args in commands {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for arg in args {
                out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                out.extend_from_slice(arg);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.writer.write_all(&out)?;
        commands.iter().map(|_| self.read_value()).collect()
    }

    /// One command, one reply.
    pub fn command(&mut self, args: &[&[u8]]) -> io::Result<Value> {
        let args = args.iter().map(|a| a.to_vec()).collect();
        Ok(self.pipeline(&[args])?.remove(0))
    }

    fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "redis closed the connection",
            ));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }

    fn read_value(&mut self) -> io::Result<Value> {
        let line = self.line()?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad reply line {line:?}"));
        let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
        let number = || rest.parse::<i64>().map_err(|_| bad());
        Ok(match kind {
            "+" => Value::Simple(rest.to_string()),
            "-" => Value::Error(rest.to_string()),
            ":" => Value::Int(number()?),
            "$" => match usize::try_from(number()?) {
                Err(_) => Value::Bulk(None),
                Ok(n) => {
                    let mut data = vec![0; n + 2];
                    self.reader.read_exact(&mut data)?;
                    data.truncate(n);
                    Value::Bulk(Some(data))
                }
            },
            "*" => match usize::try_from(number()?) {
                Err(_) => Value::Array(None),
                Ok(n) => Value::Array(Some((0..n).map(|_| self.read_value()).collect::<io::Result<_>>()?)),
            },
            _ => return Err(bad()),
        })
    }
}
