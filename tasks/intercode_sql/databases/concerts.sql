-- Music database: venues, artists, albums, concerts and concert reviews.
CREATE TABLE venue (
  venue_id INTEGER PRIMARY KEY,
  venue_name TEXT NOT NULL,
  city TEXT NOT NULL,
  country TEXT NOT NULL,
  capacity INTEGER NOT NULL,
  opened_in INTEGER NOT NULL
);

CREATE TABLE artist (
  artist_id INTEGER PRIMARY KEY,
  artist_name TEXT NOT NULL,
  genre TEXT NOT NULL,
  home_country TEXT NOT NULL,
  formed_in INTEGER NOT NULL,
  member_count INTEGER NOT NULL
);

CREATE TABLE album (
  album_id INTEGER PRIMARY KEY,
  artist_id INTEGER NOT NULL,
  album_title TEXT NOT NULL,
  release_year INTEGER NOT NULL,
  copies_sold INTEGER NOT NULL,
  FOREIGN KEY (artist_id) REFERENCES artist (artist_id)
);

CREATE TABLE concert (
  concert_id INTEGER PRIMARY KEY,
  artist_id INTEGER NOT NULL,
  venue_id INTEGER NOT NULL,
  concert_date TEXT NOT NULL,
  ticket_price REAL NOT NULL,
  tickets_sold INTEGER NOT NULL,
  FOREIGN KEY (artist_id) REFERENCES artist (artist_id),
  FOREIGN KEY (venue_id) REFERENCES venue (venue_id)
);

INSERT INTO venue (venue_id, venue_name, city, country, capacity, opened_in) VALUES
  (1, 'Harbor Arena', 'Sydney', 'Australia', 18000, 1999),
  (2, 'The Velvet Room', 'London', 'UK', 1200, 1984),
  (3, 'Riverside Amphitheater', 'Austin', 'USA', 9500, 2005),
  (4, 'Northern Lights Hall', 'Oslo', 'Norway', 4200, 2011),
  (5, 'Maple Leaf Gardens Stage', 'Toronto', 'Canada', 15000, 1993),
  (6, 'Blue Note Cellar', 'Chicago', 'USA', 650, 1978),
  (7, 'Olympia Dome', 'Berlin', 'Germany', 21000, 2008),
  (8, 'Sakura Hall', 'Tokyo', 'Japan', 7800, 2001),
  (9, 'Canal Street Club', 'Amsterdam', 'Netherlands', 900, 1996),
  (10, 'Sunset Bowl', 'Los Angeles', 'USA', 17500, 1988),
  (11, 'Royal Albert Pavilion', 'London', 'UK', 5400, 1971);

INSERT INTO artist (artist_id, artist_name, genre, home_country, formed_in, member_count) VALUES
  (1, 'The Copper Lanterns', 'Rock', 'UK', 2008, 4),
  (2, 'Mira Solano', 'Pop', 'Spain', 2015, 1),
  (3, 'Deep Frost', 'Metal', 'Norway', 2002, 5),
  (4, 'Velvet Orbit', 'Electronic', 'Germany', 2012, 2),
  (5, 'Jasper Quinn Trio', 'Jazz', 'USA', 1998, 3),
  (6, 'Sunday Parade', 'Pop', 'USA', 2017, 4),
  (7, 'Koto Dreams', 'Electronic', 'Japan', 2010, 2),
  (8, 'Iron Meridian', 'Metal', 'USA', 1995, 4),
  (9, 'Lila Brandt', 'Folk', 'Canada', 2013, 1),
  (10, 'Midnight Tramways', 'Rock', 'Australia', 2006, 5),
  (11, 'Amber Coast', 'Folk', 'Netherlands', 2019, 3),
  (12, 'Nova Harlow', 'Pop', 'UK', 2020, 1),
  (13, 'Static Bloom', 'Rock', 'Canada', 2011, 4),
  (14, 'Rosa Delgado Quartet', 'Jazz', 'Spain', 2004, 4);

INSERT INTO album (album_id, artist_id, album_title, release_year, copies_sold) VALUES
  (1, 1, 'Lanterns in the Fog', 2010, 420000),
  (2, 1, 'Copper and Coal', 2014, 610000),
  (3, 1, 'Nightshift Anthems', 2019, 380000),
  (4, 2, 'Luz de Verano', 2017, 890000),
  (5, 2, 'Second Skin', 2021, 1240000),
  (6, 3, 'Frostbitten', 2004, 150000),
  (7, 3, 'Glacier Throne', 2009, 210000),
  (8, 4, 'Orbital Drift', 2014, 330000),
  (9, 4, 'Pulse Theory', 2020, 275000),
  (10, 5, 'Blue Corners', 2001, 95000),
  (11, 5, 'Late Set at Nine', 2012, 120000),
  (12, 6, 'Parade Season', 2019, 540000),
  (13, 7, 'Paper Lanterns', 2013, 180000),
  (14, 7, 'Neon Garden', 2018, 260000),
  (15, 8, 'Meridian Steel', 1997, 700000),
  (16, 8, 'Rust Never Sleeps Here', 2003, 450000),
  (17, 8, 'Forged', 2016, 310000),
  (18, 9, 'Prairie Letters', 2015, 140000),
  (19, 10, 'Tramlines', 2008, 390000),
  (20, 10, 'Last Stop Downtown', 2013, 470000),
  (21, 11, 'Tidewater', 2021, 60000),
  (22, 12, 'Glass Hearts', 2022, 980000),
  (23, 13, 'Bloom Static', 2014, 220000),
  (24, 14, 'Noches de Jazz', 2007, 85000),
  (25, 9, 'Northern Hymns', 2020, 165000);

INSERT INTO concert (concert_id, artist_id, venue_id, concert_date, ticket_price, tickets_sold) VALUES
  (1, 1, 2, '2022-03-12', 45, 1150),
  (2, 1, 11, '2022-11-04', 60, 5100),
  (3, 1, 7, '2023-06-18', 75, 17800),
  (4, 2, 10, '2022-08-20', 89.5, 16900),
  (5, 2, 7, '2023-02-11', 95, 20500),
  (6, 2, 1, '2023-09-30', 99, 17200),
  (7, 3, 4, '2022-01-22', 55, 4100),
  (8, 3, 7, '2023-04-08', 65, 14300),
  (9, 4, 9, '2022-05-14', 35, 880),
  (10, 4, 7, '2022-12-03', 70, 19000),
  (11, 5, 6, '2022-02-19', 30, 640),
  (12, 5, 6, '2023-02-18', 32.5, 610),
  (13, 5, 2, '2023-07-29', 40, 1090),
  (14, 6, 3, '2022-07-04', 55, 9200),
  (15, 6, 10, '2023-05-27', 65, 15800),
  (16, 7, 8, '2022-09-10', 68, 7600),
  (17, 7, 9, '2023-03-25', 38, 900),
  (18, 8, 3, '2022-10-15', 72.5, 9100),
  (19, 8, 10, '2023-08-12', 80, 16400),
  (20, 8, 5, '2023-10-21', 78, 14100),
  (21, 9, 5, '2022-06-11', 42, 8800),
  (22, 9, 4, '2023-01-28', 44, 3900),
  (23, 10, 1, '2022-04-02', 70, 16200),
  (24, 10, 3, '2023-11-11', 62, 8700),
  (25, 11, 9, '2023-12-02', 28, 720),
  (26, 12, 2, '2023-02-04', 50, 1200),
  (27, 12, 11, '2023-10-14', 68, 5350),
  (28, 13, 5, '2022-08-27', 48, 11200),
  (29, 2, 8, '2022-12-17', 92, 7700),
  (30, 7, 1, '2023-07-15', 66, 13900),
  (31, 5, 3, '2023-09-09', 36, 4300),
  (32, 10, 11, '2022-09-24', 58, 5000);
