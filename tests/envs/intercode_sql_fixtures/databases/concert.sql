-- A small concert database for the InterCode-SQL tests (SQLite dialect, portable constructs).
CREATE TABLE stadium (
  stadium_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  location TEXT,
  capacity INTEGER,
  average REAL
);
CREATE TABLE singer (
  singer_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  country TEXT,
  age INTEGER,
  is_male INTEGER
);
CREATE TABLE concert (
  concert_id INTEGER PRIMARY KEY,
  concert_name TEXT,
  theme TEXT,
  stadium_id INTEGER REFERENCES stadium (stadium_id),
  year INTEGER
);
CREATE TABLE singer_in_concert (
  concert_id INTEGER REFERENCES concert (concert_id),
  singer_id INTEGER REFERENCES singer (singer_id)
);
INSERT INTO stadium VALUES (1, 'Raith Rovers', 'Stark''s Park', 10104, 864.5);
INSERT INTO stadium VALUES (2, 'Ayr United', 'Somerset Park', 11998, 1477.25);
INSERT INTO stadium VALUES (3, 'East Fife', 'Bayview Stadium', 2000, 1980);
INSERT INTO stadium VALUES (4, 'Queen''s Park', 'Hampden Park', 52500, 1294);
INSERT INTO singer VALUES (1, 'Joe Sharp', 'Netherlands', 52, 0);
INSERT INTO singer VALUES (2, 'Timbaland', 'United States', 32, 1);
INSERT INTO singer VALUES (3, 'Justin Brown', 'France', 29, 1);
INSERT INTO singer VALUES (4, 'Rose White', 'France', 41, 0);
INSERT INTO singer VALUES (5, 'John Nizinik', 'France', 43, 1);
INSERT INTO singer VALUES (6, 'Tribal King', 'France', 25, 1);
INSERT INTO concert VALUES (1, 'Auditions', 'Free choice', 1, 2014);
INSERT INTO concert VALUES (2, 'Super bootcamp', 'Free choice 2', 2, 2014);
INSERT INTO concert VALUES (3, 'Home Visits', 'Bleeding Love', 2, 2015);
INSERT INTO concert VALUES (4, 'Week 1', 'Wide Awake', 4, 2014);
INSERT INTO concert VALUES (5, 'Week 2', 'Party All Night', 3, 2015);
INSERT INTO singer_in_concert VALUES (1, 2);
INSERT INTO singer_in_concert VALUES (1, 3);
INSERT INTO singer_in_concert VALUES (1, 5);
INSERT INTO singer_in_concert VALUES (2, 3);
INSERT INTO singer_in_concert VALUES (2, 6);
INSERT INTO singer_in_concert VALUES (3, 5);
INSERT INTO singer_in_concert VALUES (4, 4);
INSERT INTO singer_in_concert VALUES (5, 6);
INSERT INTO singer_in_concert VALUES (5, 3);
